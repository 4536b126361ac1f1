// Starts the real service (HTTP + WS) on a fresh database for a test file.
import { createApp, type App, type AppOptions } from '../../src/app.ts';
import { createTestDatabase } from './db.ts';

export interface GqlResponse<T = any> {
  status: number;
  data?: T;
  errors?: Array<{ message: string; extensions?: Record<string, any>; path?: unknown[] }>;
}

export interface TestApp extends App {
  gql<T = any>(query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<GqlResponse<T>>;
  /** gql that fails the test on any GraphQL error. */
  ok<T = any>(query: string, variables?: Record<string, unknown>): Promise<T>;
}

export async function startTestApp(opts: Partial<AppOptions> = {}): Promise<TestApp> {
  const databaseUrl = opts.databaseUrl ?? (await createTestDatabase());
  const log = process.env.FORKLINE_TEST_LOG ? (m: string, e?: unknown) => console.error(m, e ?? '') : () => {};
  const app = await createApp({ log, ...opts, databaseUrl });
  // The start-up check reads "Event" in the background: a test that counts statements counts only what it caused.
  await app.startupChecks;
  const gql = async (query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query, variables }),
    });
    const text = await res.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {
      body = { errors: [{ message: text }] };
    }
    return { status: res.status, data: body.data, errors: body.errors };
  };
  return Object.assign(app, {
    gql,
    async ok(query: string, variables?: Record<string, unknown>) {
      const r = await gql(query, variables);
      if (r.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(r.errors)}`);
      return r.data;
    },
  });
}
