// Graceful shutdown of the real service: SIGTERM while a turn is
// inside a 30 s tool call. The process exits within 10 s, closes its
// subscriptions, leaves the log closed by `interrupted` closers, and a restart
// serves the session and runs its next turn. Logs are JSON lines.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService } from '../helpers/process.ts';
import { subscribeSse, subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-shutdown-'));
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

const EVENTS = 'query($id: ID!) { session(id: $id) { status eventCount turnCount events(first: 500) { edges { node { seq type data synthetic } } } } }';

describe('SIGTERM during a running turn', () => {
  it('exits within 10 s with the turn closed as interrupted; a restart serves the session', async () => {
    const databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, FORKLINE_DATA_DIR: dataDir, LOG_LEVEL: 'info' };
    const first = await startService({ env });
    let id: string;
    try {
      id = (await postGraphQL(first.url, 'mutation { createSession(input: { title: "long call" }) { id } }')).body.data.createSession.id;
      await postGraphQL(first.url, 'mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }', {
        id,
        t: '!call sleep {"ms": 30000}',
      });
      // The tool call is in flight: the model asked for it and no result exists yet.
      await waitFor(
        async () => {
          const s = (await postGraphQL(first.url, EVENTS, { id })).body.data.session;
          const types = s.events.edges.map((e: any) => e.node.type);
          return s.status === 'RUNNING' && types.at(-1) === 'model/message';
        },
        { what: 'the sleep call in flight' },
      );

      const ws = subscribeWs(first.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id });
      const sse = subscribeSse(first.url, 'subscription($id: ID!) { sessionEvents(sessionId: $id) { seq } }', { id });
      await ws.count(1);
      await sse.count(1);

      const t0 = Date.now();
      const code = await first.stop('SIGTERM');
      const elapsed = Date.now() - t0;
      expect(code).toBe(0);
      expect(elapsed).toBeLessThan(10_000);
      // Subscriptions were closed by the server, not left hanging.
      await waitFor(() => (ws.completed || ws.errors.length > 0) && (sse.completed || sse.errors.length > 0), { timeoutMs: 2000, what: 'subscriptions ended' });
      await ws.close();
      await sse.close();

      // Structured logs: every line is a JSON record.
      const records = first
        .output()
        .split('\n')
        .filter((l) => l.trim())
        .map((l) => JSON.parse(l));
      expect(records.map((r) => r.msg)).toEqual(expect.arrayContaining(['shutting down', 'stopped']));
      expect(records.find((r) => r.msg === 'shutting down')).toMatchObject({ level: 30, signal: 'SIGTERM', service: 'forkline' });
    } catch (err) {
      await first.stop('SIGKILL');
      throw new Error(`${String(err)}\n--- service output ---\n${first.output()}`, { cause: err });
    }

    // The log was closed before the process exited (docs/contract.md#repair, cause `interrupted`).
    const client = new pg.Client(pgConfigFromUrl(databaseUrl));
    await client.connect();
    try {
      const {
        rows: [session],
      } = await client.query('SELECT status, "eventCount" FROM "Session" WHERE id = $1', [id!]);
      expect(session.status).toBe('IDLE');
      const { rows } = await client.query('SELECT seq, type, data, synthetic FROM "Event" WHERE "sessionId" = $1 ORDER BY seq', [id!]);
      expect(rows.map((r) => r.seq)).toEqual(rows.map((_, i) => i));
      expect(rows.length).toBe(session.eventCount);
      const tail = rows.slice(-3);
      expect(tail.map((r) => r.type)).toEqual(['tool/result', 'step/end', 'turn/end']);
      expect(tail[0].data).toMatchObject({ status: 'interrupted', turn: 1, step: 1 });
      expect(tail[1].data).toMatchObject({ reason: 'interrupted' });
      expect(tail[2].data).toMatchObject({ turn: 1, reason: 'interrupted' });
      // The stopped process released its lease: the next process need not wait for it to expire.
      const { rows: leases } = await client.query(`SELECT count(*)::int AS n FROM "Session" WHERE "leaseOwner" IS NOT NULL`);
      expect(leases[0].n).toBe(0);
    } finally {
      await client.end();
    }

    const second = await startService({ env });
    try {
      expect((await fetch(second.url.replace(/\/graphql$/, '/readyz'))).status).toBe(200);
      const before = (await postGraphQL(second.url, EVENTS, { id: id! })).body.data.session;
      expect(before.status).toBe('IDLE');
      await postGraphQL(second.url, 'mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "are you back?" }) { inputId } }', { id: id! });
      const after = await waitFor(
        async () => {
          const s = (await postGraphQL(second.url, EVENTS, { id: id! })).body.data.session;
          return s.status === 'IDLE' && s.turnCount === 2 ? s : undefined;
        },
        { what: 'turn 2 after the restart' },
      );
      const last = after.events.edges.at(-1).node;
      expect(last).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
      // Recovery at the second start found nothing left to repair: no new synthetic events.
      expect(after.events.edges.filter((e: any) => e.node.synthetic).length).toBe(before.events.edges.filter((e: any) => e.node.synthetic).length);
    } finally {
      expect(await second.stop('SIGTERM')).toBe(0);
    }
  });
});
