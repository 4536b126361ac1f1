import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { LogState } from '../../src/core/log-state.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { anyData } from '../helpers/event-data.ts';

const scope = { tenant: 'local' };
let db: Database;
let store: SessionStore;

beforeAll(async () => {
  db = openDatabase(await createTestDatabase(), { max: 20 });
  store = new SessionStore(db.pool, toolEffectOf);
});
afterAll(() => db.close());

const note = (i: number) => ({ type: 'plugin/test/note', data: { i } });

describe('SessionStore.append', () => {
  it('8 parallel writers x 500 events on one session give seqs exactly 0..3999', async () => {
    const s = await store.createSession(scope, {});
    await Promise.all(
      Array.from({ length: 8 }, async (_, w) => {
        for (let b = 0; b < 50; b++) {
          await store.append(
            s.id,
            Array.from({ length: 10 }, (_, i) => note(w * 1000 + b * 10 + i)),
          );
        }
      }),
    );
    const { rows } = await db.pool.query<{ seq: number }>('SELECT seq FROM "Event" WHERE "sessionId" = $1 ORDER BY seq', [s.id]);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 4000 }, (_, i) => i));
    const after = await store.requireSession(scope, s.id);
    expect(after.eventCount).toBe(4000);
    // every written payload is there exactly once
    const { rows: payloads } = await db.pool.query<{ i: number }>(`SELECT (data->>'i')::int AS i FROM "Event" WHERE "sessionId" = $1 ORDER BY 1`, [s.id]);
    expect(new Set(payloads.map((p) => p.i)).size).toBe(4000);
  });

  it('two processes appending to one session at once all get through (a writer that keeps losing the race appends holding the row)', async () => {
    const s = await store.createSession(scope, {});
    const other = new SessionStore(db.pool, toolEffectOf); // another process: its own remembered end of log
    await Promise.all(
      [store, other].flatMap((writer, p) =>
        Array.from({ length: 4 }, async (_, w) => {
          for (let b = 0; b < 60; b++) await writer.append(s.id, [note(p * 10_000 + w * 1000 + b)]);
        }),
      ),
    );
    const { rows } = await db.pool.query<{ seq: number }>('SELECT seq FROM "Event" WHERE "sessionId" = $1 ORDER BY seq', [s.id]);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 480 }, (_, i) => i));
    expect((await store.requireSession(scope, s.id)).eventCount).toBe(480);
  });

  it('queueInput: one statement that reads nothing once the tree is known, exact among racing writers, refused for another tenant', async () => {
    const s = await store.createSession(scope, {});
    let statements: string[] = [];
    const counting = new Proxy(db.pool, {
      get(pool, key) {
        if (key !== 'query') return Reflect.get(pool, key, pool);
        return (...args: Parameters<typeof pool.query>) => {
          const q = args[0] as unknown as string | { text: string };
          statements.push(typeof q === 'string' ? q : q.text);
          return (pool.query as (...a: unknown[]) => unknown)(...args);
        };
      },
    });
    const fresh = new SessionStore(counting, toolEffectOf); // as a process that never touched the session
    const { event: queued } = await fresh.queueInput(s.id, 'first', { scope });
    expect(queued).toMatchObject({ seq: 0, type: 'inbox/add', data: { text: 'first', inputId: expect.stringMatching(/^in_/) } });
    await fresh.notifications.drain();
    // On one Postgres, a process that never saw the session finds its row by id, and the append returns its lineage (cached).
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/^WITH s0 AS/);
    expect(statements[0]).toContain('pg_notify'); // alone in flight: it notifies from within (append-batcher.ts)
    expect(fresh.log.cached(s.id)).toEqual(await store.log.lineage(s.id));
    statements = [];
    // On a distributed Postgres (DATABASE_DISTRIBUTED) the append names the tree (the shard's key): looked up once in the directory, then cached.
    const routed = new SessionStore(counting, toolEffectOf, { byTree: true });
    const other = await store.createSession(scope, {});
    statements = [];
    await routed.queueInput(other.id, 'routed', { scope });
    await routed.notifications.drain();
    expect(statements).toHaveLength(2);
    expect(statements[0]).toMatch(/^SELECT "treeId" FROM "SessionTree" WHERE id = \$1/);
    expect(statements[1]).toMatch(/^WITH s0 AS/);
    expect(statements[1]).toContain('"treeId" = $15');
    statements = [];
    await fresh.queueInput(s.id, 'second', { scope });
    await fresh.notifications.drain();
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/^WITH s0 AS/);
    // Racing other writers of the same session (their appends are conditional on the length they saw).
    statements = [];
    await Promise.all([
      ...Array.from({ length: 20 }, (_, i) => fresh.queueInput(s.id, `m${i}`, { scope })),
      ...Array.from({ length: 20 }, (_, i) => store.append(s.id, [note(i)])),
    ]);
    const events = await store.log.page(s.id, -1, 100);
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: 42 }, (_, i) => i));
    expect(events.filter((e) => e.type === 'inbox/add')).toHaveLength(22);
    expect(await store.log.pendingInputCountAt(s.id, 41)).toBe(22);
    expect(await store.requireSession(scope, s.id)).toMatchObject({ eventCount: 42, pendingInputCount: 22 });
    // A state `fresh` keeps moves with its inputs: taking one needs no reload.
    await fresh.append(s.id, [{ type: 'inbox/remove', data: { inputId: anyData(queued).inputId, reason: 'cancelled' } }]);
    statements = [];
    const { event: last } = await fresh.queueInput(s.id, 'last', { scope });
    await fresh.append(s.id, [{ type: 'inbox/remove', data: { inputId: anyData(last).inputId, reason: 'cancelled' } }]);
    expect(statements.filter((q) => !/^(WITH s0 AS|SELECT pg_notify)/.test(q))).toEqual([]); // no reload
    await expect(fresh.queueInput(s.id, 'elsewhere', { scope: { tenant: 'another' } })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    await expect(fresh.queueInput('ses_missing', 'nobody', { scope })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
    expect((await store.requireSession(scope, s.id)).eventCount).toBe(45);
  });

  it('queueInput with claimFor takes a free or expired lease in the same statement, never a held one (batched too)', async () => {
    const lease = async (id: string) =>
      (await db.pool.query(`SELECT "leaseOwner", "leaseToken", "leaseExpiresAt" > now() AS live FROM "Session" WHERE id = $1`, [id])).rows[0];
    const claimFor = { owner: 'me', ttlMs: 60_000 };
    // Several at once, so the batcher puts them in one statement: each block's claim lands on its own session.
    const free = await Promise.all(Array.from({ length: 12 }, () => store.createSession(scope, {})));
    const results = await Promise.all(free.map((s) => store.queueInput(s.id, 'run it here', { scope, claimFor })));
    for (const [i, r] of results.entries()) {
      expect(r.lease).toEqual({
        sessionId: free[i].id,
        token: 1,
        ttlMs: 60_000,
        lineage: { sessionId: free[i].id, treeId: free[i].id, ranges: [], inheritedEventCount: 0 },
      });
      expect(await lease(free[i].id)).toEqual({ leaseOwner: 'me', leaseToken: 1, live: true });
    }
    // Held by another process: the input is queued, the lease left alone.
    const held = await store.createSession(scope, {});
    await db.pool.query(`UPDATE "Session" SET "leaseOwner" = 'other', "leaseToken" = 7, "leaseExpiresAt" = now() + interval '1 minute' WHERE id = $1`, [
      held.id,
    ]);
    const notTaken = await store.queueInput(held.id, 'theirs', { scope, claimFor });
    expect(notTaken.lease).toBeUndefined();
    expect(notTaken.event.seq).toBe(0);
    expect(await lease(held.id)).toEqual({ leaseOwner: 'other', leaseToken: 7, live: true });
    // Expired: taken over, fencing the old holder with a new token.
    await db.pool.query(`UPDATE "Session" SET "leaseExpiresAt" = now() - interval '1 second' WHERE id = $1`, [held.id]);
    expect((await store.queueInput(held.id, 'ours now', { scope, claimFor })).lease).toMatchObject({ token: 8 });
    expect(await lease(held.id)).toEqual({ leaseOwner: 'me', leaseToken: 8, live: true });
    // Without claimFor nothing about the lease changes.
    await db.pool.query(`UPDATE "Session" SET "leaseOwner" = NULL, "leaseExpiresAt" = NULL WHERE id = $1`, [held.id]);
    expect((await store.queueInput(held.id, 'just queued', { scope })).lease).toBeUndefined();
    expect(await lease(held.id)).toEqual({ leaseOwner: null, leaseToken: 8, live: null });
  });

  it('answers with the events exactly as a read of the log returns them (data as jsonb gives it back), alone and batched with others', async () => {
    // Key order as jsonb keeps it (shorter first, then bytewise; integer-like keys; non-ASCII), -0, a "constructor" key
    // (a "__proto__" key is refused by the codec: tests/security/proto-keys.test.ts).
    const tricky = JSON.parse('{"zeta": 1, "b": {"constructor": {"x": 1}, "ä": 2, "aa": 3, "10": 4, "9": 5, "B": 6}, "a": [1, -0, 0.1, 1e21, "é"]}');
    // Many keys too (more than are sorted by insertion), in an order jsonb does not keep.
    const many = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`${'k'.repeat(1 + ((i * 7) % 5))}${(i * 13) % 40}`, i]));
    const payloads = [tricky, { later: 'x', n: -0, list: [{ y: 1, x: [null] }], many }, { text: 'lorem', i: 7 }];
    const sessions = await Promise.all(payloads.map(() => store.createSession(scope, {})));
    // Together, so the appends share a statement (append-batcher.ts); then one alone.
    const together = await Promise.all(sessions.map((s, i) => store.append(s.id, [{ type: 'plugin/test/json', data: payloads[i] }, note(i)])));
    const alone = await store.append(sessions[0].id, [note(9)]);
    for (const [i, s] of sessions.entries()) {
      const read = await store.log.page(s.id, -1, 100);
      const answered = i === 0 ? [...together[i], ...alone] : together[i];
      expect(answered.map((e) => [e.seq, e.type, e.synthetic, e.createdAt.getTime()])).toEqual(
        read.map((e) => [e.seq, e.type, e.synthetic, e.createdAt.getTime()]),
      );
      // Byte for byte: key order included.
      expect(answered.map((e) => JSON.stringify(e.data))).toEqual(read.map((e) => JSON.stringify(e.data)));
    }
  });

  it('a batch is atomic: one invalid event writes nothing', async () => {
    const s = await store.createSession(scope, {});
    await expect(store.append(s.id, [note(1), { type: 'turn/start', data: { turn: 'one' } }])).rejects.toThrow(/data.turn/);
    expect((await store.requireSession(scope, s.id)).eventCount).toBe(0);
    expect((await store.log.page(s.id, -1, 1000)).length).toBe(0);
  });

  it('two sessions do not block each other', async () => {
    const a = await store.createSession(scope, {});
    const b = await store.createSession(scope, {});
    const holder = await db.pool.connect();
    try {
      // Hold A's row lock, as a long append to A would.
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM "Session" WHERE id = $1 FOR UPDATE', [a.id]);
      const blockedA = store.append(a.id, [note(1)]);
      const appendedB = await store.append(b.id, [note(2)]);
      expect(appendedB.map((e) => e.seq)).toEqual([0]);
      const stateA = await Promise.race([blockedA.then(() => 'done'), new Promise((r) => setTimeout(() => r('waiting'), 200))]);
      expect(stateA).toBe('waiting');
      await holder.query('COMMIT');
      expect((await blockedA).map((e) => e.seq)).toEqual([0]);
    } finally {
      holder.release();
    }
  });

  it('maintains turnCount, status and title from the appended events', async () => {
    const s = await store.createSession(scope, { title: 'first' });
    await store.append(s.id, [
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'hi' } },
      { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
    ]);
    let row = await store.requireSession(scope, s.id);
    expect([row.turnCount, row.status, row.eventCount]).toEqual([1, 'RUNNING', 4]);
    await store.append(s.id, [
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
      { type: 'session/title', data: { title: 'second' } },
    ]);
    row = await store.requireSession(scope, s.id);
    expect([row.turnCount, row.status, row.title]).toEqual([1, 'IDLE', 'second']);
  });

  it('events are immutable in the database', async () => {
    const s = await store.createSession(scope, { title: 't' });
    await expect(db.pool.query(`UPDATE "Event" SET type = 'x' WHERE "sessionId" = $1`, [s.id])).rejects.toThrow(/immutable/);
    await expect(db.pool.query(`DELETE FROM "Event" WHERE "sessionId" = $1`, [s.id])).rejects.toThrow(/immutable/);
  });

  it('a conditional append fails with SESSION_BUSY when the log moved', async () => {
    const s = await store.createSession(scope, {});
    await store.append(s.id, [note(1)], { expectedEventCount: 0 });
    await expect(store.append(s.id, [note(2)], { expectedEventCount: 0 })).rejects.toMatchObject({ code: 'SESSION_BUSY' });
    await expect(store.append('ses_missing', [note(2)])).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' });
  });

  describe('relationship rules (docs/contract.md#log), checked against the end of the log', () => {
    const call = { id: 'call_1', name: 'clock', arguments: '{}' };
    const openStep = [
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'hi' } },
      { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [call] } },
    ];
    const result = (callId: string) => ({
      type: 'tool/result',
      data: { turn: 1, step: 1, callId, resultId: `res_${callId}`, status: 'ok', content: 'noon' },
    });

    it('refuses an orphan result, a duplicate result, a step/end with no open step and a misnumbered turn; writes nothing', async () => {
      const s = await store.createSession(scope, {});
      await store.append(s.id, openStep);
      const refused = async (events: Array<{ type: string; data: unknown }>, rule: string, seq: number) => {
        await expect(store.append(s.id, events)).rejects.toMatchObject({ code: 'BAD_USER_INPUT', details: { rule, seq } });
      };
      await refused([result('call_404')], 'result pairing', 5);
      await refused([note(1), { type: 'step/end', data: { turn: 1, step: 2, reason: 'completed' } }], 'step bracket', 6);
      await refused([{ type: 'turn/start', data: { turn: 2, inputId: 'in_2' } }], 'turn bracket', 5);
      await refused([{ type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } }], 'inbox', 5);
      expect((await store.requireSession(scope, s.id)).eventCount).toBe(5);
      await store.append(s.id, [result('call_1')]);
      await refused([result('call_1')], 'result pairing', 6);
      await store.append(s.id, [
        { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
        { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
      ]);
      await refused([{ type: 'turn/start', data: { turn: 3, inputId: 'in_1' } }], 'turn numbering', 8);
      await store.append(s.id, [{ type: 'turn/start', data: { turn: 2, inputId: 'in_1' } }]);
    });

    it('a writer whose remembered end of log went stale (another process appended) checks against the new end', async () => {
      const s = await store.createSession(scope, {});
      await store.append(s.id, openStep); // `store` now remembers the open step
      const elsewhere = new SessionStore(db.pool, toolEffectOf);
      await elsewhere.append(s.id, [result('call_1')]);
      await expect(store.append(s.id, [result('call_1')])).rejects.toMatchObject({ code: 'BAD_USER_INPUT', details: { rule: 'result pairing', seq: 6 } });
      await store.append(s.id, [{ type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } }]);
      expect((await store.log.page(s.id, -1, 100)).map((e) => e.type).slice(-2)).toEqual(['tool/result', 'step/end']);
    });

    it("a state the caller replayed (a runner's fold) is checked against like a loaded one: stale, it is reloaded; older than the known one, it is ignored", async () => {
      const s = await store.createSession(scope, {});
      await store.append(s.id, openStep);
      const replayed = new LogState();
      for (const e of await store.log.page(s.id, -1, 100)) replayed.apply(e);
      const runner = new SessionStore(db.pool, toolEffectOf);
      runner.knowTail(s.id, replayed);
      await store.append(s.id, [result('call_1')]); // made stale by another writer
      await expect(runner.append(s.id, [result('call_1')])).rejects.toMatchObject({ code: 'BAD_USER_INPUT', details: { rule: 'result pairing', seq: 6 } });
      await runner.append(s.id, [{ type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } }]);
      // The replay (open step, unanswered call) is older than what `runner` knows now: checked against it, turn/end would break the step bracket.
      runner.knowTail(s.id, replayed);
      await runner.append(s.id, [{ type: 'turn/end', data: { turn: 1, reason: 'completed' } }]);
      expect(await store.requireSession(scope, s.id)).toMatchObject({ eventCount: 8, status: 'IDLE' });
    });

    it('checking an append on a long log reads its open turn and inbox, not the log', async () => {
      const s = await store.createSession(scope, {});
      for (let i = 0; i < 5; i++)
        await store.append(
          s.id,
          Array.from({ length: 2000 }, (_, j) => note(i * 2000 + j)),
        );
      await store.append(s.id, openStep);
      let rowsRead = 0;
      // A fresh store (as after a restart): it must load the end of the log to check.
      const counting = new Proxy(db.pool, {
        get(pool, key) {
          if (key !== 'query') return Reflect.get(pool, key, pool);
          return async (...args: Parameters<typeof pool.query>) => {
            const res = await (pool.query as (...a: unknown[]) => Promise<{ rowCount: number | null; command: string }>)(...args);
            if (res.command === 'SELECT') rowsRead += res.rowCount ?? 0;
            return res;
          };
        },
      });
      const fresh = new SessionStore(counting, toolEffectOf);
      await fresh.append(s.id, [result('call_1')]);
      expect(rowsRead).toBeGreaterThan(0);
      expect(rowsRead).toBeLessThan(20);
    });
  });
});
