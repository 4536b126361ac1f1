// What one request may make Postgres do, in time (docs/operations.md "Memory
// and time"): a query's statements are bounded by FORKLINE_QUERY_TIMEOUT_MS, a
// mutation's by FORKLINE_MUTATION_TIMEOUT_MS, each statement of a long mutation
// (a fork) by FORKLINE_LONG_STATEMENT_TIMEOUT_MS; past its bound a statement is
// cancelled on the server and the field answers QUERY_TIMEOUT. A query whose
// client went away, and a subscription that ended, leave no statement running.
// The slow statements are real reads and writes made to wait on a lock this
// test holds, not sleeps; each test checks pg_stat_activity for the service's
// backends still waiting. Every app here runs with the bounds as the service's
// default config sets them (no FORKLINE_STATEMENT_BOUNDS), only the timeouts
// made small.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, securityOptions } from '../../src/config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { importSession, locker } from '../helpers/locked-reads.ts';
import { startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.ts';
import { subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

const BOUND_MS = 1500;

/** The statement bounds of the service's config from `env` (the rest of the security options: the tests' defaults). */
function boundsOf(env: Record<string, string>) {
  const { statementBounds, statementTimeouts } = securityOptions(loadConfig(env));
  return { statementBounds, statementTimeouts };
}
/** Small query and mutation bounds, a long one far beyond the tests' waits. */
const SMALL_BOUNDS = boundsOf({
  FORKLINE_QUERY_TIMEOUT_MS: String(BOUND_MS),
  FORKLINE_MUTATION_TIMEOUT_MS: String(BOUND_MS),
  FORKLINE_LONG_STATEMENT_TIMEOUT_MS: '120000',
});

const EVENTS = `query($id: ID!) { session(id: $id) { id events(first: 20) { edges { node { seq } } } } }`;
const SEARCH = `query { searchSessions(query: "answer") { edges { node { kind } } } }`;

describe('statements bounded in time', () => {
  let app: TestApp;
  let sessionId: string;
  let hold: Awaited<ReturnType<typeof locker>>;

  beforeAll(async () => {
    app = await startTestApp({ security: SMALL_BOUNDS });
    sessionId = await importSession(app, 'ses_deadline');
    hold = await locker(app.db.url);
  });
  afterAll(async () => {
    await hold?.end();
    await app?.close();
  });

  it('a query whose statement outlives FORKLINE_QUERY_TIMEOUT_MS answers QUERY_TIMEOUT, and its statement no longer runs', async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    try {
      const started = Date.now();
      const r = await app.gql(EVENTS, { id: sessionId });
      const took = Date.now() - started;
      expect(r.errors?.[0]?.extensions?.code).toBe('QUERY_TIMEOUT');
      expect(r.errors?.[0]?.message).toContain('FORKLINE_QUERY_TIMEOUT_MS');
      expect(took).toBeGreaterThanOrEqual(BOUND_MS - 50);
      expect(took).toBeLessThan(15_000); // bounded: without the bound it waits for the lock, which this test holds
      // The statement was cancelled on the server, not merely given up on by the client.
      await waitFor(async () => (await hold.waiting()) === 0, { timeoutMs: 5000, what: 'no statement waiting on the lock' });
    } finally {
      await hold.release();
    }
    // The pool's connection is fine afterwards: the same read answers.
    const d = await app.ok(EVENTS, { id: sessionId });
    expect(d.session.events.edges.length).toBe(20);
  });

  it('a search past FORKLINE_QUERY_TIMEOUT_MS answers QUERY_TIMEOUT, and its statement no longer runs', async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    try {
      const r = await app.gql(SEARCH);
      expect(r.errors?.[0]?.extensions?.code).toBe('QUERY_TIMEOUT');
      expect(r.errors?.[0]?.message).toContain('FORKLINE_QUERY_TIMEOUT_MS');
      await waitFor(async () => (await hold.waiting()) === 0, { timeoutMs: 5000, what: 'no statement waiting on the lock' });
    } finally {
      await hold.release();
    }
    expect((await app.ok(SEARCH)).searchSessions.edges.length).toBeGreaterThan(0);
  });

  it('a mutation past FORKLINE_MUTATION_TIMEOUT_MS answers QUERY_TIMEOUT and writes nothing', async () => {
    await hold.lock('LOCK TABLE "Session" IN SHARE MODE'); // reads go on; a new session's row waits
    let r;
    try {
      r = await app.gql(`mutation { createSession(input: { title: "never" }) { id } }`);
      await waitFor(async () => (await hold.waiting()) === 0, { timeoutMs: 5000, what: 'no statement waiting on the lock' });
    } finally {
      await hold.release();
    }
    expect(r.errors?.[0]?.extensions?.code).toBe('QUERY_TIMEOUT');
    expect(r.errors?.[0]?.message).toContain('FORKLINE_MUTATION_TIMEOUT_MS');
    const { rows } = await hold.client.query(
      `SELECT count(*)::int AS n FROM "Session" s JOIN "Event" e ON e."sessionId" = s.id WHERE e.data->>'title' = 'never'`,
    );
    expect(rows[0].n).toBe(0); // rolled back whole
  });

  it('a fork is a long mutation: it may wait longer than the mutation bound, each statement within FORKLINE_LONG_STATEMENT_TIMEOUT_MS', async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    const fork = app.gql(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id: sessionId });
    try {
      await waitFor(async () => (await hold.waiting()) > 0, { what: "the fork's statement waiting on the lock" });
      await new Promise((r) => setTimeout(r, BOUND_MS + 1000)); // past the mutation bound, far within the long one
    } finally {
      await hold.release();
    }
    const r = await fork;
    expect(r.errors).toBeUndefined();
    expect(r.data.forkSession.session.id).toMatch(/^ses_/);
  });
});

describe('statements of a client that went away', () => {
  let app: TestApp;
  let sessionId: string;
  let hold: Awaited<ReturnType<typeof locker>>;

  beforeAll(async () => {
    app = await startTestApp({ security: boundsOf({}) }); // the default config: bounds of 60 s, so only the client's going ends these statements
    sessionId = await importSession(app, 'ses_gone');
    hold = await locker(app.db.url);
  });
  afterAll(async () => {
    await hold?.end();
    await app?.close();
  });

  it('an HTTP query whose client disconnects leaves no statement running', async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    try {
      const body = JSON.stringify({ query: SEARCH });
      const req = http.request(app.url, { method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } });
      req.on('error', () => {}); // we hang up
      req.end(body);
      await waitFor(async () => (await hold.waiting()) > 0, { what: "the query's statement waiting on the lock" });
      req.destroy();
      // Gone well before the 60 s bound: the client's leaving cancelled it.
      await waitFor(async () => (await hold.waiting()) === 0, { timeoutMs: 10_000, what: 'no statement waiting after the client left' });
    } finally {
      await hold.release();
    }
  });

  it('a subscription that ends leaves no statement running (its catch-up read cancelled)', async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    try {
      const sub = subscribeWs(app.url, `subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: 0) { seq } }`, { id: sessionId });
      await waitFor(async () => (await hold.waiting()) > 0, { what: "the subscription's read waiting on the lock" });
      await sub.close();
      await waitFor(async () => (await hold.waiting()) === 0, { timeoutMs: 10_000, what: 'no statement waiting after the subscription ended' });
    } finally {
      await hold.release();
    }
  });

  it("a subscriber waiting on another's catch-up read keeps its subscription when that other one leaves", async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    const query = `subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq } }`;
    const first = subscribeWs(app.url, query, { id: sessionId });
    const second = subscribeWs<{ sessionEvents: { seq: number } }>(app.url, query, { id: sessionId });
    try {
      await waitFor(async () => (await hold.waiting()) > 0, { what: "the first subscriber's read waiting on the lock" });
      // The second subscriber finds the shared read under way and waits on it.
      await new Promise((r) => setTimeout(r, 500));
      await first.close(); // its read is cancelled
      await waitFor(async () => (await hold.waiting()) <= 1, { timeoutMs: 10_000, what: "the first subscriber's read cancelled" });
      await hold.release();
      const items = await second.until((xs) => xs.length >= 21, 'every event of the session');
      expect(items.slice(0, 21).map((x) => x.sessionEvents.seq)).toEqual([...Array(21).keys()]);
      expect(second.errors).toEqual([]);
    } finally {
      await hold.release().catch(() => {});
      await second.close();
    }
  });
});

// PgBouncer in transaction mode: the cancel goes through the pooler, which
// hands it to the server connection running the client's statement.
describe('behind PgBouncer in transaction mode', () => {
  let app: TestApp;
  let bouncer: PgBouncer;
  let sessionId: string;
  let hold: Awaited<ReturnType<typeof locker>>;

  beforeAll(async () => {
    const direct = await createTestDatabase();
    const database = new URL(direct).pathname.slice(1);
    bouncer = await startPgBouncer(direct, [database], { poolSize: 4 });
    app = await startTestApp({
      databaseUrl: bouncer.url(database),
      directUrl: direct,
      preparedStatements: false, // PgBouncer 1.18: no protocol-level prepared statements
      security: SMALL_BOUNDS,
    });
    sessionId = await importSession(app, 'ses_pooled');
    hold = await locker(direct);
  }, 180_000);
  afterAll(async () => {
    await hold?.end();
    await app?.close();
    await bouncer?.stop();
  });

  it('a query past its bound answers QUERY_TIMEOUT and leaves no statement on the server', async () => {
    await hold.lock('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
    try {
      const r = await app.gql(SEARCH);
      expect(r.errors?.[0]?.extensions?.code).toBe('QUERY_TIMEOUT');
      await waitFor(async () => (await hold.waiting()) === 0, { timeoutMs: 5000, what: 'no statement waiting on the lock' });
    } finally {
      await hold.release();
    }
    expect((await app.ok(EVENTS, { id: sessionId })).session.events.edges.length).toBe(20);
  });
});
