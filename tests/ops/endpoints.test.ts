// /healthz, /readyz and /metrics on a real server.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeSse, subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { expectedMigrations } from '../../src/db/migrate.ts';

let app: TestApp;
const endpoint = (path: string) => app.url.replace(/\/graphql$/, path);

async function metrics(): Promise<string> {
  const res = await fetch(endpoint('/metrics'));
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

/** The value of one sample, e.g. sample(text, 'forkline_active_subscriptions'), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

describe('health and readiness', () => {
  it('/healthz answers while the process runs', async () => {
    const res = await fetch(endpoint('/healthz'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
    expect((await fetch(endpoint('/healthz'), { method: 'POST' })).status).toBe(405);
  });

  it('/readyz is ready when the database answers and every migration is applied', async () => {
    const res = await fetch(endpoint('/readyz'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ready', ready: true, checks: { database: 'ok', migrations: 'ok' } });
    expect(expectedMigrations().length).toBeGreaterThanOrEqual(2);
  });

  it('/readyz is 503 with a pending migration, and after close', async () => {
    const other = await startTestApp();
    const client = new pg.Client(pgConfigFromUrl(other.db.url));
    await client.connect();
    try {
      const [last] = expectedMigrations().slice(-1);
      await client.query('DELETE FROM _prisma_migrations WHERE migration_name = $1', [last]);
      const res = await fetch(other.url.replace(/\/graphql$/, '/readyz'));
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ status: 'not ready', ready: false, checks: { database: 'ok', migrations: `pending: ${last}` } });
    } finally {
      await client.end();
      await other.close();
    }
  });
});

describe('/metrics', () => {
  it('counts requests, operations and errors by code; times turns and forks; tracks open subscriptions', async () => {
    const { createSession } = await app.ok('mutation { createSession(input: { title: "metered" }) { id } }');
    const id = createSession.id;
    await app.ok('mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "hello" }) { inputId } }', { id });
    await waitFor(async () => (await app.ok('query($id: ID!) { session(id: $id) { turnCount status } }', { id })).session.status === 'IDLE');
    await app.ok('mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 0 }) { cutSeq } }', { id });
    await app.ok('mutation($id: ID!) { branchSession(input: { sessionId: $id }) { cutSeq } }', { id });
    await app.gql('mutation { forkSession(input: { sessionId: "ses_missing", atSeq: 0 }) { cutSeq } }');
    await app.gql('{ nope }');

    const ws = subscribeWs(app.url, 'subscription { sessionsChanged { id } }');
    const sse = subscribeSse(app.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id });
    await sse.count(1);
    await waitFor(async () => sample(await metrics(), 'forkline_active_subscriptions') === 2, { what: '2 open subscriptions' });

    const text = await metrics();
    expect(sample(text, 'forkline_http_requests_total', { route: '/graphql', method: 'POST', status: '200' })).toBeGreaterThan(5);
    expect(sample(text, 'forkline_graphql_operations_total', { type: 'mutation', field: 'createSession' })).toBe(1);
    expect(sample(text, 'forkline_graphql_operations_total', { type: 'subscription', field: 'sessionsChanged' })).toBe(1);
    expect(sample(text, 'forkline_graphql_errors_total', { code: 'SESSION_NOT_FOUND' })).toBe(1);
    expect(sample(text, 'forkline_graphql_errors_total', { code: 'BAD_USER_INPUT' })).toBe(1);
    expect(sample(text, 'forkline_turn_duration_seconds_count', { reason: 'completed' })).toBe(1);
    expect(sample(text, 'forkline_fork_duration_seconds_count', { kind: 'fork' })).toBe(2); // the failed fork is timed too
    expect(sample(text, 'forkline_fork_duration_seconds_count', { kind: 'branch' })).toBe(1);
    expect(sample(text, 'forkline_fork_duration_seconds_sum', { kind: 'branch' })).toBeGreaterThan(0);
    expect(sample(text, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(text).not.toContain(id); // no ids or tenants as labels

    await ws.close();
    await sse.close();
    await waitFor(async () => sample(await metrics(), 'forkline_active_subscriptions') === 0, { what: 'subscriptions closed' });
    expect(sample(await metrics(), 'forkline_http_requests_total', { route: '/metrics', method: 'GET', status: '200' })).toBeGreaterThan(0);
  });
});
