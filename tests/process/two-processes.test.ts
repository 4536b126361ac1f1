// Two service processes on one database (docs/contract.md#agent-loop): bounded connections,
// work spread across them, and a takeover when one dies.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-two-'));
const running: ServiceProcess[] = [];
let admin: pg.Pool;
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  await admin?.end();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const start = async (databaseUrl: string, env: Record<string, string> = {}) => {
  const p = await startService({ env: { DATABASE_URL: databaseUrl, FORKLINE_DATA_DIR: dataDir, ...env } });
  running.push(p);
  return p;
};

async function createSessions(n: number): Promise<string[]> {
  const { rows } = await admin.query<{ id: string }>(
    `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title)
     SELECT v, v, 'local', 'two' FROM (SELECT 'ses_two_' || replace(gen_random_uuid()::text, '-', '') AS v FROM generate_series(1, $1)) x RETURNING id, "treeId")
     INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s RETURNING id`,
    [n],
  );
  return rows.map((r) => r.id);
}
const send = (p: ServiceProcess, sessionId: string, text: string) =>
  postGraphQL(p.url, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });

describe('two processes on one database', () => {
  let databaseUrl: string;
  beforeAll(async () => {
    // A role limited to 40 connections, as a small managed Postgres would be (superusers ignore limits).
    const owner = await createTestDatabase();
    admin = new pg.Pool({ ...pgConfigFromUrl(owner), max: 2 });
    const role = `limited_${crypto.randomUUID().slice(0, 8)}`;
    const db = pgConfigFromUrl(owner).database;
    await admin.query(`CREATE ROLE ${role} LOGIN PASSWORD 'limited' CONNECTION LIMIT 40`);
    await admin.query(`GRANT ALL ON SCHEMA public TO ${role}; GRANT ALL ON ALL TABLES IN SCHEMA public TO ${role}; GRANT CONNECT ON DATABASE ${db} TO ${role}`);
    const u = new URL(owner);
    u.username = role;
    u.password = 'limited';
    databaseUrl = u.toString();
  });

  it('1,000 messages at once across both, on a role limited to 40 connections: no 5xx, each answered once, in order', async () => {
    const [a, b] = await Promise.all([start(databaseUrl), start(databaseUrl)]);
    const sessions = await createSessions(200);
    const statuses = new Map<number, number>();
    const sent = new Map<string, string[]>();
    let peak = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await admin.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename LIKE 'limited_%' AND datname = current_database()`);
        peak = Math.max(peak, rows[0].n);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await Promise.all(
      sessions.map(async (id, i) => {
        for (let m = 0; m < 5; m++) {
          const r = await send((i + m) % 2 ? b : a, id, `message ${m}\n!call clock`);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          if (r.body.data) sent.set(id, [...(sent.get(id) ?? []), r.body.data.sendMessage.inputId]);
        }
      }),
    );
    expect([...statuses]).toEqual([[200, 1000]]);
    await waitFor(
      async () => {
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1) AND "turnCount" = 5 AND status = 'IDLE' AND "pendingInputCount" = 0`,
          [sessions],
        );
        return rows[0].n === sessions.length;
      },
      { what: 'every message answered', timeoutMs: 120_000 },
    );
    sampling = false;
    await sampler;
    for (const id of sessions) {
      const { rows } = await admin.query(`SELECT type, data FROM "Event" WHERE "sessionId" = $1 AND type IN ('turn/start', 'turn/end') ORDER BY seq`, [id]);
      expect(
        rows.filter((e) => e.type === 'turn/start').map((e) => e.data.inputId),
        id,
      ).toEqual(sent.get(id));
      expect(
        rows.filter((e) => e.type === 'turn/end').map((e) => e.data.reason),
        id,
      ).toEqual(Array(5).fill('completed'));
    }
    expect(peak).toBeLessThanOrEqual(2 * (10 + 1));
    await Promise.all([a.stop(), b.stop()]);
  }, 180_000); // 47 s of the default 60 on a loaded machine; its wait for the answers alone allows 120

  it('when one of them is killed mid-turn, the other takes every session over, repairs each turn once and answers what waited', async () => {
    // Short leases so the takeover is quick. B starts only once A holds all fifty:
    // started earlier, B would rightly claim some of them itself.
    const fast = { FORKLINE_LEASE_TTL_MS: '2000' };
    const a = await start(databaseUrl, fast);
    const sessions = await createSessions(50);
    // A takes all fifty, each inside a slow tool call, with a second message waiting.
    await Promise.all(sessions.map((id) => send(a, id, '!call sleep {"ms": 30000}')));
    await Promise.all(sessions.map((id) => send(a, id, 'after the crash')));
    await waitFor(
      async () => {
        const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = ANY($1) AND type = 'model/message'`, [sessions]);
        return rows[0].n === sessions.length;
      },
      { what: 'fifty tool calls in flight' },
    );
    const b = await start(databaseUrl, fast);
    a.child.kill('SIGKILL');
    await a.exited;
    const killedAt = Date.now();
    await waitFor(
      async () => {
        const { rows } = await admin.query(
          `SELECT count(*)::int AS n FROM "Session" WHERE id = ANY($1) AND "turnCount" = 2 AND status = 'IDLE' AND "pendingInputCount" = 0`,
          [sessions],
        );
        return rows[0].n === sessions.length;
      },
      { what: 'B to take everything over', timeoutMs: 60_000 },
    );
    const tookMs = Date.now() - killedAt;
    for (const id of sessions) {
      const { rows } = await admin.query(`SELECT type, data, synthetic FROM "Event" WHERE "sessionId" = $1 ORDER BY seq`, [id]);
      const tail = rows
        .filter((e) => ['tool/result', 'step/end', 'turn/end', 'turn/start'].includes(e.type))
        .map((e) => `${e.type}:${e.data.status ?? e.data.reason ?? e.data.turn}${e.synthetic ? '*' : ''}`);
      expect(tail, id).toEqual([
        'turn/start:1',
        'tool/result:interrupted*',
        'step/end:interrupted*',
        'turn/end:interrupted*',
        'turn/start:2',
        'step/end:completed',
        'turn/end:completed',
      ]);
    }
    // The lease expiry (2 s) and a sweep (2 s), and fifty repairs: printed, not asserted (a loaded machine's figure
    // says nothing of the code; the wait above bounds it).
    console.log(`B took fifty sessions over in ${tookMs} ms after A was killed`);
    await b.stop();
  }, 120_000); // its wait for the takeover alone allows 60 s
});
