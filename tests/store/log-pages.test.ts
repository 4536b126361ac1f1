// SessionLog.pages: the log in pages with the next one read ahead (the agent's
// cold replay and recording exports read whole logs this way).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';

const scope = { tenant: 'local' };
let db: Database;
let store: SessionStore;
let parent: string;
let child: string;

beforeAll(async () => {
  db = openDatabase(await createTestDatabase(), { max: 5 });
  store = new SessionStore(db.pool, toolEffectOf);
  parent = (await store.createSession(scope, {})).id;
  await store.append(
    parent,
    Array.from({ length: 30 }, (_, i) => ({ type: 'plugin/test/note', data: { i } })),
  );
  // A fork at seq 20 inherits 0..20 from the parent's rows; 10 events of its own follow its marker.
  child = (await store.fork(scope, parent, 20)).session.id;
  await store.append(
    child,
    Array.from({ length: 10 }, (_, i) => ({ type: 'plugin/test/note', data: { i: 100 + i } })),
  );
});
afterAll(() => db.close());

const seqsOf = async (gen: AsyncGenerator<Array<{ seq: number }>>) => {
  const pages: number[][] = [];
  for await (const page of gen) pages.push(page.map((e) => e.seq));
  return pages;
};

describe('SessionLog.pages', () => {
  it('gives every event once, in order, in pages of the asked size, across a fork’s inherited range', async () => {
    const { eventCount } = await store.requireSession(scope, child);
    for (const pageSize of [1, 7, 10, eventCount, eventCount + 5]) {
      const pages = await seqsOf(store.log.pages(child, { pageSize }));
      expect(pages.flat()).toEqual(Array.from({ length: eventCount }, (_, i) => i));
      expect(pages.every((p, i) => p.length === (i < pages.length - 1 ? pageSize : p.length) && p.length > 0)).toBe(true);
    }
  });

  it('starts after afterSeq and stops before endSeq', async () => {
    expect((await seqsOf(store.log.pages(child, { afterSeq: 17, endSeq: 26, pageSize: 4 }))).flat()).toEqual([18, 19, 20, 21, 22, 23, 24, 25]);
    expect(await seqsOf(store.log.pages(child, { afterSeq: 5, endSeq: 6 }))).toEqual([]);
    expect((await seqsOf(store.log.pages(child, { afterSeq: 1_000 }))).flat()).toEqual([]);
  });

  it('a reader that stops after the first page leaves no read behind (the pool is free again)', async () => {
    for (let i = 0; i < 20; i++) {
      for await (const page of store.log.pages(parent, { pageSize: 3 })) {
        expect(page.map((e) => e.seq)).toEqual([0, 1, 2]);
        break;
      }
    }
    // The abandoned reads ahead finish and give their connections back.
    await expect.poll(() => db.pool.waitingCount === 0 && db.pool.idleCount === db.pool.totalCount).toBe(true);
    const { rows } = await db.pool.query('SELECT 1 AS one');
    expect(rows).toEqual([{ one: 1 }]);
  });

  it('stream gives the same events one by one', async () => {
    const seqs: number[] = [];
    for await (const e of store.log.stream(child, { afterSeq: 8, pageSize: 6 })) seqs.push(e.seq);
    const { eventCount } = await store.requireSession(scope, child);
    expect(seqs).toEqual(Array.from({ length: eventCount - 9 }, (_, i) => 9 + i));
  });
});
