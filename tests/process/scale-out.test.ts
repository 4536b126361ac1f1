// The scale-out set-up end to end: two service
// processes behind a real PgBouncer in transaction mode, LISTEN and
// migrations on a direct connection, a streaming hot standby for reads.
// 200 sessions are created, sent a message, forked with a message and
// watched through the other process: every input is answered once, every read
// right after a write sees it, every subscriber gets each event once, in
// order, and Postgres never serves the two processes with more backends than
// the pooler's pool.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sampleBackends, startPgBouncer, type PgBouncer } from '../helpers/pgbouncer.ts';
import { standbyReads, startPrimary, startStandby, type Primary, type Standby } from '../helpers/standby.ts';
import { startService, type ServiceProcess } from '../helpers/process.ts';
import { subscribeWs, wsClient, type Recorded } from '../helpers/subscribe.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

const SESSIONS = 200;
const POOL_SIZE = 8;
const DIRECT = 'forkline-direct';
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-scale-out-'));
fs.chmodSync(dataDir, 0o755);
let primary: Primary; // an embedded Postgres of this test's own: the standby is a copy of it
let bouncer: PgBouncer;
let standby: Standby;
let admin: pg.Pool;
let processes: ServiceProcess[] = [];

const SEND = 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }';
const FORK = 'mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }';
const CREATE = 'mutation { createSession(input: { title: "scale" }) { id } }';
const PAGE = 'query($id: ID!) { session(id: $id) { eventCount events(first: 500) { edges { node { seq type data } } } } }';
const EVENTS = 'subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq type data } }';

beforeAll(async () => {
  primary = await startPrimary();
  const db = 'forkline_scale_out';
  const url = await primary.database(db);
  admin = new pg.Pool({ ...pgConfigFromUrl(url), application_name: 'forkline-test-admin', max: 2 });
  // The primary's fast shutdown at the end can reach a client the pool is still closing (57P01): not a failure of the test.
  admin.on('error', () => {});
  [bouncer, standby] = await Promise.all([startPgBouncer(primary.serverUrl, [db], { poolSize: POOL_SIZE }), startStandby(primary.serverUrl)]);
  const env = {
    FORKLINE_DATA_DIR: dataDir,
    DATABASE_URL: bouncer.url(db),
    DATABASE_DIRECT_URL: `${primary.serverUrl}/${db}?application_name=${DIRECT}`,
    DATABASE_READ_URL: `${standby.serverUrl}/${db}`,
    DATABASE_PREPARED_STATEMENTS: 'false',
  };
  processes = await Promise.all([startService({ env }), startService({ env })]);
}, 120_000);
afterAll(async () => {
  await Promise.all(processes.map((p) => p.stop('SIGKILL')));
  await bouncer?.stop();
  await standby?.destroy();
  await admin?.end();
  await primary?.stop();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/**
 * A POST on a connection of its own: each session's requests are seconds apart
 * (it waits for its turns), and a kept-alive connection reused just as the
 * server closes it as idle (keepAliveTimeout) fails with ECONNRESET on a busy machine.
 */
const gql = (p: ServiceProcess, query: string, variables?: unknown) =>
  new Promise<any>((resolve, reject) => {
    const body = JSON.stringify({ query, variables });
    const req = http.request(
      p.url,
      { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => {
          const r = JSON.parse(text);
          if (res.statusCode !== 200 || r.errors) reject(new Error(`${res.statusCode} ${JSON.stringify(r.errors)}`));
          else resolve(r.data);
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
type Ev = { seq: number; type: string; data: { inputId?: string; reason?: string } };
const ended = (items: Array<{ sessionEvents: Ev }>, turns: number) => items.filter((i) => i.sessionEvents.type === 'turn/end').length >= turns;
const servedByStandby = async (p: ServiceProcess) => {
  const text = await (await fetch(p.url.replace(/graphql$/, 'metrics'))).text();
  return standbyReads(text).standby;
};

it(`${SESSIONS} sessions send, fork and subscribe across two processes behind PgBouncer with a standby: each input answered once, no stale read, backends within the pool`, async () => {
  const backends = sampleBackends(admin, [DIRECT, 'forkline-test-admin']);
  const sockets = processes.map((p) => wsClient(p.url));
  const subs: Array<Recorded<{ sessionEvents: Ev }>> = [];
  const stale: string[] = [];
  const sent = new Map<string, string>(); // session → the input sent to it
  /** Reads the session through `p` and checks that it holds the input just written. */
  const readsOwnWrite = async (p: ServiceProcess, id: string, inputId: string) => {
    const s = (await gql(p, PAGE, { id })).session;
    const seqs = s.events.edges.map((e: { node: Ev }) => e.node.seq);
    if (!s.events.edges.some((e: { node: Ev }) => e.node.type === 'inbox/add' && e.node.data.inputId === inputId))
      stale.push(`${id}: ${inputId} not read back`);
    // The page may run past the row's eventCount (read a moment later), never short of it, never with a gap.
    if (seqs.length < s.eventCount || seqs.join() !== Array.from({ length: seqs.length }, (_, i) => i).join())
      stale.push(`${id}: seqs ${seqs.join()} of ${s.eventCount}`);
  };
  const children: string[] = [];
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, i) => {
      const [p, q] = i % 2 ? [processes[0], processes[1]] : [processes[1], processes[0]];
      const [sp, sq] = i % 2 ? [sockets[0], sockets[1]] : [sockets[1], sockets[0]];
      const id = (await gql(p, CREATE)).createSession.id as string;
      const sub = subscribeWs<{ sessionEvents: Ev }>(q.url, EVENTS, { id }, sq);
      subs.push(sub);
      const { inputId } = (await gql(p, SEND, { i: { sessionId: id, text: `hello ${i}\n!call clock` } })).sendMessage;
      sent.set(id, inputId);
      await readsOwnWrite(q, id, inputId); // the other process, right after the write
      await sub.until((items) => ended(items, 1), 'the first turn', 120_000);
      const child = (await gql(q, FORK, { i: { sessionId: id, message: `fork ${i}` } })).forkSession.session.id as string;
      children.push(child);
      const childSub = subscribeWs<{ sessionEvents: Ev }>(p.url, EVENTS, { id: child }, sp);
      subs.push(childSub);
      const forkInput = (items: Array<{ sessionEvents: Ev }>) =>
        items.map((e) => e.sessionEvents).find((e) => e.type === 'inbox/add' && e.data.inputId !== inputId);
      const childInput = forkInput(await childSub.until((items) => !!forkInput(items), "the fork's input", 60_000))!.data.inputId!;
      sent.set(child, childInput);
      await readsOwnWrite(p, child, childInput);
      await childSub.until((items) => items.filter((e) => e.sessionEvents.type === 'turn/start').length >= 2 && ended(items, 2), "the fork's turn", 120_000);
    }),
  );
  const peak = await backends.stop();
  expect(stale).toEqual([]);

  // Every input answered once and completed; every subscriber got the log as stored, once and in order.
  const { rows } = await admin.query<{ sessionId: string; seq: number; type: string; data: Ev['data'] }>(
    `SELECT "sessionId", seq, type, data FROM "Event" WHERE "sessionId" = ANY($1) ORDER BY "sessionId", seq`,
    [[...sent.keys()]],
  );
  for (const [id, inputId] of sent) {
    const own = rows.filter((r) => r.sessionId === id);
    const starts = own.filter((r) => r.type === 'turn/start').map((r) => r.data.inputId);
    expect(
      starts.filter((x) => x === inputId),
      id,
    ).toEqual([inputId]);
    expect(own.filter((r) => r.type === 'turn/end').at(-1)?.data.reason, id).toBe('completed');
  }
  for (const sub of subs) {
    const seqs = sub.items.map((e) => e.sessionEvents.seq);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i));
  }
  const parents = [...sent.keys()].filter((id) => !children.includes(id));
  expect(parents).toHaveLength(SESSIONS);
  expect(children).toHaveLength(SESSIONS);
  expect(peak).toBeGreaterThan(0);
  expect(peak).toBeLessThanOrEqual(POOL_SIZE);
  const fromStandby = (await Promise.all(processes.map(servedByStandby))).reduce((a, b) => a + b, 0);
  expect(fromStandby).toBeGreaterThan(0);
  await Promise.all(subs.map((s) => s.close()));
  await Promise.all(sockets.map((s) => s.dispose()));
}, 300_000);
