// The import slots between tenants (docs/operations.md "Memory and time", host/import-slots.ts): a tenant has at
// most FORKLINE_MAX_IMPORTS_PER_TENANT imports running or waiting, through every door (POST /recordings, the
// importRecording mutation over HTTP and over graphql-ws: past it 429 RATE_LIMITED with Retry-After), and a free slot
// goes to the tenants in turn. Before, the queue was one FIFO with no share: a tenant that queued five imports made
// another tenant's one upload wait behind all five, and a tenant could queue as many mutations as it liked.
// Driven, not timed: a deferred trigger holds every new session's COMMIT on an advisory lock the test holds (as
// import-slots.test.ts does), so the import that has the slot keeps it until the test lets it go.
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { AppOptions } from '../../src/app.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { wsClient } from '../helpers/subscribe.ts';
import { commitsWaiting as commitsWaitingOn, holdCommits, oneEventRecording } from '../helpers/held-commits.ts';

const LOCK = 4344;
const TOKENS = ['alpha', 'beta', 'gamma'].map((tenant) => [`${tenant}-token-0123456789abcdef`, tenant] as const);
const as = (i: number) => ({ authorization: `Bearer ${TOKENS[i][0]}` });
const IMPORT = 'mutation($r: String!) { importRecording(recording: $r) { id title } }';

let app: TestApp | undefined;
/** The test's own connection, outside the service's pool: it holds the lock. */
let holder: pg.Client | undefined;

async function startHeld(opts: Partial<AppOptions>): Promise<{ app: TestApp; holder: pg.Client }> {
  const databaseUrl = await createTestDatabase();
  app = await startTestApp({
    databaseUrl,
    poolMax: 8,
    ...opts,
    security: { rateLimit: false, apiTokens: new Map(TOKENS), uploadsPerTenant: 20, ...opts.security },
  });
  await holdCommits(app.db.pool, String(LOCK));
  holder = new pg.Client({ connectionString: databaseUrl });
  await holder.connect();
  await holder.query('SELECT pg_advisory_lock($1)', [LOCK]);
  return { app, holder };
}

afterEach(async () => {
  await holder?.end(); // its lock goes with it
  await app?.close();
  holder = app = undefined;
});

const commitsWaiting = (h: pg.Client) => commitsWaitingOn(h, LOCK);

/** The titles of the sessions imported, in the order their imports ran (one slot: one transaction after another). */
const importOrder = async (h: pg.Client) =>
  (await h.query<{ title: string }>(`SELECT title FROM "Session" ORDER BY xmin::text::bigint`)).rows.map((r) => r.title);

const recording = (title: string) => oneEventRecording(title, 'ses_fair');

/**
 * An upload asking for progress. `admitted` resolves once its answer has begun: a 200 (progress lines: the body is
 * spooled and handed to the import, so it runs or waits for a slot) or the refusal; `done` with its lines.
 */
function upload(a: TestApp, tenant: number, title: string) {
  const res = fetch(a.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson', accept: 'application/x-ndjson', ...as(tenant) },
    body: recording(title),
  });
  const done = res.then(async (r) => ({
    status: r.status,
    retryAfter: r.headers.get('retry-after'),
    lines: (await r.text())
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l)),
  }));
  return { admitted: res.then((r) => r.status), done };
}

/** The import mutation over graphql-ws, on a socket of the tenant's own. */
async function wsImport(a: TestApp, tenant: number, title: string) {
  const client = wsClient(a.url, { connectionParams: as(tenant) });
  try {
    return await new Promise<{ data?: any; errors?: any[] }>((resolve) => {
      let result: { data?: any; errors?: any[] } = {};
      client.subscribe(
        { query: IMPORT, variables: { r: recording(title) } },
        { next: (r) => void (result = r as typeof result), error: (e) => resolve({ errors: Array.isArray(e) ? e : [e] }), complete: () => resolve(result) },
      );
    });
  } finally {
    await client.dispose();
  }
}

describe('import slots between tenants', () => {
  it("serve the tenants in turn: another tenant's one upload waits behind one of a backlog, not all of it (before: behind all five)", async () => {
    const { app, holder } = await startHeld({ importsAtOnce: 1, importsPerTenant: 10 });
    const first = upload(app, 0, 'a0');
    await expect.poll(() => commitsWaiting(holder), { timeout: 15_000, interval: 20 }).toBe(1);
    // Alpha queues four more behind the one that holds the slot (each answered 200: waiting, with progress lines)…
    const backlog = [];
    for (const title of ['a1', 'a2', 'a3', 'a4']) {
      const u = upload(app, 0, title);
      expect(await u.admitted).toBe(200);
      backlog.push(u);
    }
    // …then beta sends its one upload.
    const beta = upload(app, 1, 'b1');
    expect(await beta.admitted).toBe(200);
    await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    for (const u of [first, ...backlog, beta]) expect((await u.done).lines.at(-1)).toMatchObject({ status: 201 });
    // Alpha's next, then beta's turn, then the rest of alpha's (before: a0 … a4, then b1).
    expect(await importOrder(holder)).toEqual(['a0', 'a1', 'b1', 'a2', 'a3', 'a4']);
  }, 60_000);

  it('refuse a tenant past FORKLINE_MAX_IMPORTS_PER_TENANT running or waiting, 429 RATE_LIMITED with Retry-After, through every door; other tenants import', async () => {
    const { app, holder } = await startHeld({ importsAtOnce: 1, importsPerTenant: 2 });
    const running = upload(app, 0, 'a-running');
    await expect.poll(() => commitsWaiting(holder), { timeout: 15_000, interval: 20 }).toBe(1);
    const waiting = upload(app, 0, 'a-waiting');
    expect(await waiting.admitted).toBe(200);

    // POST /recordings: refused (its own cap, FORKLINE_MAX_UPLOADS_PER_TENANT, is 20 here).
    const third = await upload(app, 0, 'a-third').done;
    expect(third.status).toBe(429);
    expect(third.retryAfter).toBe('5');
    expect(third.lines[0].errors[0]).toMatchObject({ extensions: { code: 'RATE_LIMITED' } });
    expect(third.lines[0].errors[0].message).toMatch(/at most 2 recording imports of a tenant run or wait at once \(FORKLINE_MAX_IMPORTS_PER_TENANT\)/);
    // The mutation over HTTP: the same refusal, and the same status.
    const overHttp = await app.gql(IMPORT, { r: recording('a-http') }, as(0));
    expect(overHttp.status).toBe(429);
    expect(overHttp.errors?.[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterSeconds: 5 });
    // The mutation over graphql-ws.
    const overWs = await wsImport(app, 0, 'a-ws');
    expect(overWs.errors?.[0].extensions).toEqual({ code: 'RATE_LIMITED', retryAfterSeconds: 5 });

    // Another tenant is not refused: its import waits for the slot, and runs.
    const beta = app.gql(IMPORT, { r: recording('b') }, as(1));
    await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    expect((await beta).data?.importRecording.title).toBe('b');
    for (const u of [running, waiting]) expect((await u.done).lines.at(-1)).toMatchObject({ status: 201 });
    expect((await importOrder(holder)).sort()).toEqual(['a-running', 'a-waiting', 'b']);
    // Its share back, alpha imports again.
    expect((await app.gql(IMPORT, { r: recording('a-again') }, as(0))).data?.importRecording.title).toBe('a-again');
  }, 60_000);

  it("hold the importRecording mutation, over HTTP and over graphql-ws, until a slot is free: it waits holding no connection, and counts in its tenant's share", async () => {
    const { app, holder } = await startHeld({ importsAtOnce: 1, importsPerTenant: 1 });
    // The one slot, taken through POST /recordings.
    const upl = upload(app, 0, 'uploaded');
    await expect.poll(() => commitsWaiting(holder), { timeout: 15_000, interval: 20 }).toBe(1);
    let settled = 0;
    const overHttp = app.gql(IMPORT, { r: recording('over http') }, as(1)).finally(() => settled++);
    const overWs = wsImport(app, 2, 'over ws').finally(() => settled++);
    // A moment for both to reach the line; then their tenants' shares are taken by them: a second of each is refused.
    await new Promise((r) => setTimeout(r, 500));
    await expect
      .poll(async () => (await app.gql(IMPORT, { r: recording('beta again') }, as(1))).errors?.[0].extensions?.code, { timeout: 15_000, interval: 50 })
      .toBe('RATE_LIMITED');
    await expect.poll(async () => (await wsImport(app, 2, 'gamma again')).errors?.[0].extensions?.code, { timeout: 15_000, interval: 50 }).toBe('RATE_LIMITED');
    // Waiting: neither has run (no transaction of theirs waits at COMMIT, nothing answered).
    expect(await commitsWaiting(holder)).toBe(1);
    expect(settled).toBe(0);
    await holder.query('SELECT pg_advisory_unlock($1)', [LOCK]);
    expect((await overHttp).data?.importRecording.title).toBe('over http');
    expect((await overWs).data?.importRecording.title).toBe('over ws');
    expect((await upl.done).lines.at(-1)).toMatchObject({ status: 201 });
    expect((await importOrder(holder)).sort()).toEqual(['over http', 'over ws', 'uploaded']);
  }, 60_000);
});
