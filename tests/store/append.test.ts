import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';

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
          await store.append(s.id, Array.from({ length: 10 }, (_, i) => note(w * 1000 + b * 10 + i)));
        }
      }),
    );
    const { rows } = await db.pool.query<{ seq: number }>('SELECT seq FROM "Event" WHERE "sessionId" = $1 ORDER BY seq', [s.id]);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 4000 }, (_, i) => i));
    const after = await store.requireSession(scope, s.id);
    expect(after.eventCount).toBe(4000);
    // every written payload is there exactly once
    const { rows: payloads } = await db.pool.query<{ i: number }>(
      `SELECT (data->>'i')::int AS i FROM "Event" WHERE "sessionId" = $1 ORDER BY 1`, [s.id]);
    expect(new Set(payloads.map((p) => p.i)).size).toBe(4000);
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
    await store.append(s.id, [{ type: 'turn/end', data: { turn: 1, reason: 'completed' } }, { type: 'session/title', data: { title: 'second' } }]);
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
});
