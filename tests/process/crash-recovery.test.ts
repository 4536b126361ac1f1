// Crash recovery and leases across real server processes (docs/contract.md#crash-recovery, docs/contract.md#agent-loop).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

let databaseUrl: string;
let dataDir: string;
let pool: pg.Pool;
const running: ServiceProcess[] = [];

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-crash-'));
  pool = new pg.Pool(pgConfigFromUrl(databaseUrl));
});
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  await pool.end();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

async function start() {
  const p = await startService({ env: { DATABASE_URL: databaseUrl, FORKLINE_DATA_DIR: dataDir } });
  running.push(p);
  return p;
}
const gql = async (p: ServiceProcess, query: string, variables?: unknown) => {
  const r = await postGraphQL(p.url, query, variables);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
};
const events = async (id: string) => (await pool.query('SELECT seq, type, data, synthetic FROM "Event" WHERE "sessionId" = $1 ORDER BY seq', [id])).rows;
const workspace = async (p: ServiceProcess, id: string) =>
  (await gql(p, 'query($id: ID!) { session(id: $id) { workspace { key value seq } } }', { id })).session.workspace;

describe('crash recovery', () => {
  it('a SIGKILLed turn inside a slow side-effect tool is closed with interrupted closers once; its write never happened', async () => {
    const a = await start();
    const { createSession: s } = await gql(a, 'mutation { createSession(input: { title: "crash" }) { id } }');
    await gql(a, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
      i: { sessionId: s.id, text: '!call note_write {"key":"k","value":"v","delayMs":60000}' },
    });
    // The call is in flight (its result, which would carry the write, is not recorded).
    await waitFor(async () => (await events(s.id)).at(-1)?.type === 'model/message', { what: 'the tool call' });
    a.child.kill('SIGKILL');
    await a.exited;
    const crashed = await events(s.id);
    expect(crashed.at(-1).type).toBe('model/message');

    const b = await start();
    const repaired = await waitFor(
      async () => {
        const e = await events(s.id);
        return e.at(-1).type === 'turn/end' ? e : null;
      },
      { what: 'recovery' },
    );
    const closers = repaired.slice(crashed.length);
    expect(closers.map((e: any) => [e.type, e.data.status ?? e.data.reason, e.synthetic])).toEqual([
      ['tool/result', 'interrupted', true],
      ['step/end', 'interrupted', true],
      ['turn/end', 'interrupted', true],
    ]);
    expect(closers[0].data.content).toContain('the session stopped while the call was in flight, so its effect is unknown');
    expect(closers[0].data.content).toContain('"note_write" has side effects');
    const { session } = await gql(b, 'query($id: ID!) { session(id: $id) { status eventCount } }', { id: s.id });
    expect(session).toEqual({ status: 'IDLE', eventCount: repaired.length });
    // The workspace is the log's: the write whose result was never recorded is absent after recovery.
    expect(repaired.some((e: any) => e.type === 'plugin/workspace/write')).toBe(false);
    expect(await workspace(b, s.id)).toEqual([]);
    expect(await b.stop('SIGTERM')).toBe(0);

    const c = await start();
    // A process claims what was left behind before it serves (app.ts: host.start): had it found work, it would hold it by now.
    expect((await events(s.id)).length).toBe(repaired.length); // nothing new
    expect((await pool.query('SELECT "leaseOwner" FROM "Session" WHERE id = $1', [s.id])).rows[0].leaseOwner).toBeNull();
    // Asked through the agent, the note is not there; the interrupted call was not run again.
    await gql(c, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: s.id, text: '!call note_read {"key":"k"}' } });
    const after = await waitFor(
      async () => {
        const e = await events(s.id);
        return e.at(-1).type === 'turn/end' && e.length > repaired.length ? e : null;
      },
      { what: 'the note_read turn' },
    );
    expect(after.filter((e: any) => e.type === 'tool/result').map((e: any) => [e.data.name, e.data.status, e.data.content])).toEqual([
      ['note_write', 'interrupted', closers[0].data.content],
      ['note_read', 'error', 'no note named "k"'],
    ]);
    expect(await workspace(c, s.id)).toEqual([]);
    await c.stop('SIGTERM');
  });

  it('a live process takes over the lease of a dead one and repairs the session', async () => {
    const a = await start();
    const b = await start();
    const { createSession: s } = await gql(a, 'mutation { createSession(input: { title: "takeover" }) { id } }');
    await gql(a, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
      i: { sessionId: s.id, text: '!call sleep {"ms": 60000}' },
    });
    await waitFor(async () => (await events(s.id)).some((e: any) => e.type === 'model/message'), { what: 'the call' });
    a.child.kill('SIGKILL');
    await a.exited;
    const repaired = await waitFor(
      async () => {
        const e = await events(s.id);
        return e.at(-1).type === 'turn/end' ? e : null;
      },
      { what: 'takeover by the sweep', timeoutMs: 20_000 },
    );
    expect(repaired.at(-1).data.reason).toBe('interrupted');
    await gql(b, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: s.id, text: 'after the crash' } });
    await waitFor(async () => (await events(s.id)).filter((e: any) => e.type === 'turn/end').length === 2, { what: 'turn 2' });
    expect((await events(s.id)).at(-1).data).toEqual({ turn: 2, reason: 'completed' });
    await b.stop('SIGTERM');
  });
});

describe('two server processes on one database and one session', () => {
  it('answers inputs sent to both in order, one turn at a time', async () => {
    const a = await start();
    const b = await start();
    const { createSession: s } = await gql(a, 'mutation { createSession(input: { title: "two" }) { id } }');
    const sent: string[] = [];
    for (let i = 0; i < 6; i++) {
      const p = i % 2 ? b : a;
      const r = await gql(p, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
        i: { sessionId: s.id, text: `input ${i}\n!call sleep {"ms": 60}` },
      });
      sent.push(r.sendMessage.inputId);
    }
    const log = await waitFor(
      async () => {
        const e = await events(s.id);
        return e.filter((x: any) => x.type === 'turn/end').length === 6 ? e : null;
      },
      { what: 'six turns', timeoutMs: 30_000 },
    );
    const turnEvents = log.filter((e: any) => e.type === 'turn/start' || e.type === 'turn/end');
    // strictly alternating start/end: never two turns at once
    expect(turnEvents.map((e: any) => `${e.type}:${e.data.turn}`)).toEqual([1, 2, 3, 4, 5, 6].flatMap((t) => [`turn/start:${t}`, `turn/end:${t}`]));
    expect(log.filter((e: any) => e.type === 'turn/start').map((e: any) => e.data.inputId)).toEqual(sent);
    expect(log.filter((e: any) => e.type === 'turn/end').every((e: any) => e.data.reason === 'completed')).toBe(true);
    expect(log.map((e: any) => e.seq)).toEqual(log.map((_: unknown, i: number) => i));
    await Promise.all([a.stop(), b.stop()]);
  });
});
