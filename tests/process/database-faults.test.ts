// The service under database faults, as a real process on its own Postgres:
// backends terminated mid-work (leases, transactions, forks) and Postgres
// stopped for 5 s under load. The process stays up, answers 503 (never 500)
// while the database is away, is unready meanwhile, and afterwards every
// accepted message is answered exactly once, no session is left running, and a
// subscriber that resumes with afterSeq has every event once, in order.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startEmbeddedPostgres, type EmbeddedDatabase } from '../../src/db/embedded.ts';
import { ensureDatabase, migrate } from '../../src/db/migrate.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-faults-'));
fs.chmodSync(dir, 0o755);
let port: number;
let postgres: EmbeddedDatabase | undefined;
let databaseUrl: string;
let service: ServiceProcess;
let admin: pg.Pool;
const LEASE_TTL_MS = 2000;

const startPostgres = async () => (postgres = await startEmbeddedPostgres(path.join(dir, 'pg'), () => {}, { port }));

beforeAll(async () => {
  port = await freePort();
  await startPostgres();
  databaseUrl = `${postgres!.serverUrl}/faults`;
  await ensureDatabase(databaseUrl);
  await migrate(databaseUrl);
  service = await startService({ env: { DATABASE_URL: databaseUrl, FORKLINE_LEASE_TTL_MS: String(LEASE_TTL_MS), FORKLINE_DATA_DIR: path.join(dir, 'data') } });
  admin = new pg.Pool({ ...pgConfigFromUrl(databaseUrl), max: 2 });
  admin.on('error', () => {});
}, 120_000);
afterAll(async () => {
  await service?.stop('SIGTERM');
  await admin?.end().catch(() => {});
  await postgres?.stop().catch(() => {});
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Posts a query; the HTTP status and the first error code. */
async function post(query: string, variables?: unknown) {
  const res = await fetch(service.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  const body = (await res.json().catch(() => ({}))) as { data?: any; errors?: Array<{ extensions?: { code?: string } }> };
  return { status: res.status, code: body.errors?.[0]?.extensions?.code, data: body.data, retryAfter: res.headers.get('retry-after') };
}

/** Keeps sending messages to the sessions and reading them until stopped; records every answer's status. */
function load(sessions: string[]) {
  const statuses = new Map<string, number>();
  const accepted = new Map<string, string[]>(); // session → input ids accepted, in order
  let running = true;
  let answers = 0;
  const count = (s: string) => (answers++, statuses.set(s, (statuses.get(s) ?? 0) + 1));
  /** Resolves once `n` more answers came back (the load has moved on), whatever they were. */
  const moreAnswers = (n: number) => {
    const target = answers + n;
    return waitFor(() => answers >= target, { what: `${n} more answers`, timeoutMs: 60_000 });
  };
  const done = Promise.all(
    sessions.map(async (id, i) => {
      for (let n = 0; running; n++) {
        const r = await post(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, {
          i: { sessionId: id, text: `message ${n}\n!call clock` },
        }).catch(() => null);
        if (!r) continue;
        count(`${r.status} ${r.code ?? ''}`.trim());
        if (r.data?.sendMessage) accepted.set(id, [...(accepted.get(id) ?? []), r.data.sendMessage.inputId]);
        const q = await post(`query($id: ID!) { session(id: $id) { eventCount status events(last: 5) { edges { node { seq } } } } }`, { id }).catch(() => null);
        if (q) count(`${q.status} ${q.code ?? ''}`.trim());
        await new Promise((r) => setTimeout(r, 20 + i));
      }
    }),
  );
  const of = (s: string) => statuses.get(s) ?? 0;
  return { statuses, accepted, moreAnswers, of, stop: async () => ((running = false), await done) };
}

/** A sessionEvents subscriber that reconnects and resumes from the last seq it holds. */
function resumingSubscriber(sessionId: string) {
  const seqs: number[] = [];
  let stopped = false;
  let client: ReturnType<typeof createClient> | undefined;
  const run = async () => {
    while (!stopped) {
      client = createClient({ url: service.url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, retryAttempts: 0, lazy: true });
      try {
        for await (const r of client.iterate<{ sessionEvents: { seq: number } }>({
          query: 'subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq } }',
          variables: { id: sessionId, after: seqs.at(-1) ?? -1 },
        })) {
          if (r.data) seqs.push(r.data.sessionEvents.seq);
          if (stopped) break;
        }
      } catch {
        // lost connection or a refusal while the database is away: try again
      } finally {
        await client!.dispose();
      }
      if (!stopped) await new Promise((r) => setTimeout(r, 200));
    }
  };
  const done = run();
  return { seqs, stop: async () => ((stopped = true), await client?.dispose(), await done) };
}

async function createSessions(n: number) {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await post('mutation { createSession(input: { title: "fault" }) { id } }')).data.createSession.id);
  return ids;
}

/** The process is still up, and no answer was a 5xx other than the retryable 503. */
function expectUpWithout500s(statuses: Map<string, number>) {
  expect(service.child.exitCode).toBeNull();
  const fiveHundreds = [...statuses.keys()].filter((c) => c.startsWith('5') && c !== '503 SERVICE_UNAVAILABLE');
  expect(fiveHundreds, JSON.stringify([...statuses])).toEqual([]);
}

/** Every accepted input answered by exactly one completed or interrupted turn, in order; nothing left running. */
async function expectAllAnswered(accepted: Map<string, string[]>) {
  await waitFor(
    async () => {
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "Session" WHERE status = 'RUNNING' OR "pendingInputCount" > 0`);
      return rows[0].n === 0;
    },
    { what: 'every session idle with an empty inbox', timeoutMs: 60_000 },
  );
  for (const [id, inputs] of accepted) {
    const { rows } = await admin.query(
      `SELECT type, data FROM "Event" WHERE "sessionId" = $1 AND type IN ('turn/start', 'turn/end', 'inbox/add') ORDER BY seq`,
      [id],
    );
    const added = rows.filter((e) => e.type === 'inbox/add').map((e) => e.data.inputId);
    const taken = rows.filter((e) => e.type === 'turn/start').map((e) => e.data.inputId);
    for (const input of inputs) expect(added, id).toContain(input);
    expect(taken, id).toEqual(added); // every input once, in the order it was queued
    expect(rows.filter((e) => e.type === 'turn/end').length, id).toBe(taken.length);
  }
}

describe('database faults', () => {
  it('terminated backends (leases, transactions, forks, appends) never crash the process or answer 500', async () => {
    const sessions = await createSessions(6);
    const traffic = load(sessions);
    const forks = (async () => {
      for (let i = 0; i < 20; i++)
        await post(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, { i: { sessionId: sessions[i % 6], atSeq: 0 } });
    })();
    for (let i = 0; i < 8; i++) {
      await traffic.moreAnswers(4); // mid-work: the load is under way between terminations
      await admin.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'faults' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
      );
    }
    await forks;
    await traffic.stop();
    expectUpWithout500s(traffic.statuses);
    expect(traffic.statuses.get('200')).toBeGreaterThan(10);
    await expectAllAnswered(traffic.accepted);
  });

  it('Postgres stopped under load for longer than a lease: 503 with Retry-After meanwhile, unready, then everything resumes', async () => {
    const sessions = await createSessions(4);
    const subscriber = resumingSubscriber(sessions[0]);
    const traffic = load(sessions);
    await waitFor(() => [...traffic.accepted.values()].flat().length >= 4 && subscriber.seqs.length > 0, { what: 'the load and the subscriber under way' });
    await postgres!.stop();
    postgres = undefined;
    const downSince = Date.now();
    await waitFor(() => traffic.of('503 SERVICE_UNAVAILABLE') > 0, { what: 'the load to see the outage' });
    const ready = await fetch(service.url.replace(/\/graphql$/, '/readyz'));
    expect(ready.status).toBe(503);
    const refused = await post(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: sessions[1], text: 'while down' } });
    expect(refused).toMatchObject({ status: 503, code: 'SERVICE_UNAVAILABLE', retryAfter: '2' });
    // Down past the lease TTL: every lease held when it went away has expired by the database's clock when it is back.
    await waitFor(() => Date.now() - downSince > LEASE_TTL_MS, { what: 'the leases to outlive their TTL', timeoutMs: LEASE_TTL_MS + 5000 });
    await startPostgres();
    await waitFor(async () => (await fetch(service.url.replace(/\/graphql$/, '/readyz'))).status === 200, { what: 'ready again', timeoutMs: 30_000 });
    const acceptedBefore = [...traffic.accepted.values()].flat().length;
    await waitFor(() => [...traffic.accepted.values()].flat().length >= acceptedBefore + 4, { what: 'messages accepted again', timeoutMs: 30_000 });
    await traffic.stop();
    expectUpWithout500s(traffic.statuses);
    expect(traffic.statuses.get('503 SERVICE_UNAVAILABLE')).toBeGreaterThan(0);
    await expectAllAnswered(traffic.accepted);

    // The subscriber resumed after the outage with no gap and no duplicate.
    const { rows } = await admin.query(`SELECT "eventCount" AS n FROM "Session" WHERE id = $1`, [sessions[0]]);
    await waitFor(() => subscriber.seqs.length >= rows[0].n, { what: 'the subscriber to catch up', timeoutMs: 30_000 });
    await subscriber.stop();
    expect(subscriber.seqs.slice(0, rows[0].n)).toEqual(Array.from({ length: rows[0].n }, (_, i) => i));
  });
});
