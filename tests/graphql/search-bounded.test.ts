// What one searchSessions page reads is bounded whatever other tenants wrote
// last (docs/api.md#search). A page walks its own tenant's newest inputs and
// answers in list order (Event.tenant leads the recency index), so another
// tenant's burst of messages is not in its way: the page reads about a page's
// worth of rows, as before the burst. When the tenant's own newest rows lack
// the word and its older ones hold many matches, at most a window's worth is
// read from the text index; past that the page walks on in list order, a
// bounded number of rows, and a page still short ends early with a cursor
// where it stopped. Each statement on "Event" is run again under EXPLAIN
// ANALYZE to count the rows it read.
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { EVENT_WINDOW, WALK_WINDOWS } from '../../src/store/session-search.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { analyzed, isSelect, statementRecorder, tableRowsRead } from '../helpers/explain.ts';

/** Alpha's turns: "ordinary" in each input and answer, 3,200 matches in all, more than a window. */
const TURNS = 1600;

let app: TestApp;
const onEvent = statementRecorder(/"Event"/);
let alpha: string;
let beta: string;
/** Alpha's matching seqs, newest first. */
let matches: number[];

const SEARCH = `query($q: String!, $first: Int, $after: String) {
  searchSessions(query: $q, first: $first, after: $after) { edges { node { seq session { id } } } pageInfo { hasNextPage endCursor } }
}`;
async function search(after?: string) {
  const r = await app.gql(SEARCH, { q: 'ordinary', first: 20, after }, A);
  if (r.errors?.length) throw new Error(JSON.stringify(r.errors));
  return r.data!.searchSessions as {
    edges: Array<{ node: { seq: number; session: { id: string } } }>;
    pageInfo: { hasNextPage: boolean; endCursor: string | null };
  };
}

/** Filler: `n` answers without the word in `sessionId` (of `tenant`), newer than everything before, written in bulk. */
async function answers(sessionId: string, tenant: string, n: number) {
  const { rows } = await app.db.pool.query<{ treeId: string; next: number }>(
    `SELECT s."treeId", coalesce((SELECT max(seq) FROM "Event" e WHERE e."sessionId" = s.id), -1) + 1 AS next FROM "Session" s WHERE s.id = $1`,
    [sessionId],
  );
  await app.db.pool.query(
    `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "createdAt", tenant)
     SELECT $1, $2::int + k, $3, 'model/message', jsonb_build_object('turn', 1, 'step', 1, 'text', 'chatter ' || k, 'toolCalls', '[]'::jsonb), false, 0,
            now() + interval '1 minute', $5
       FROM generate_series(0, $4::int - 1) AS k`,
    [sessionId, rows[0].next, rows[0].treeId, n, tenant],
  );
  await app.db.pool.query('ANALYZE "Event"');
}

/** The most rows of "Event" one statement of `run` reads (EXPLAIN ANALYZE of each, run again as recorded). */
async function mostRowsRead(run: () => Promise<unknown>) {
  let most = 0;
  for (const s of (await onEvent.during(run)).filter((s) => isSelect(s.sql)))
    most = Math.max(most, tableRowsRead(await analyzed(app.db.pool, s.sql, s.params), 'Event'));
  return most;
}

beforeAll(async () => {
  app = await startTwoTenantApp({
    onQuery: onEvent.onQuery,
  });
  alpha = (await app.services.store.createSession({ tenant: 'alpha' }, { title: 'Old notes' })).id;
  matches = [];
  for (let from = 1; from <= TURNS; from += 100) {
    const events: NewEvent[] = [];
    for (let n = from; n < from + 100; n++) events.push(...textTurn(n, `an ordinary question ${n}`, `an ordinary answer ${n}`));
    const written = await app.services.store.append(alpha, events);
    matches.push(...written.filter((e) => e.type === 'inbox/add' || e.type === 'model/message').map((e) => e.seq));
  }
  matches.reverse();
  beta = (await app.services.store.createSession({ tenant: 'beta' }, { title: 'Busy' })).id;
}, 120_000);
afterAll(() => app?.close());

it("another tenant's burst of messages does not change what a page reads", async () => {
  await answers(beta, 'beta', EVENT_WINDOW + 1300);
  let page: Awaited<ReturnType<typeof search>> | undefined;
  const most = await mostRowsRead(async () => (page = await search()));
  expect(page!.edges.map((e) => [e.node.session.id, e.node.seq])).toEqual(matches.slice(0, 20).map((seq) => [alpha, seq]));
  expect(page!.pageInfo.hasNextPage).toBe(true);
  // Alpha's 20 newest rows, all matches: none of beta's (a walk over every tenant's rows read a window of them, 2,000).
  expect(most).toBeLessThanOrEqual(40);
});

it('a page that reads its bound of rows without filling ends early, and the next page goes on from there', async () => {
  // Alpha's own newer rows without the word, more than a page reads: the window and every walked window.
  const chatter = (await app.services.store.createSession({ tenant: 'alpha' }, { title: 'Chatter' })).id;
  await answers(chatter, 'alpha', (WALK_WINDOWS + 1) * EVENT_WINDOW + 2000);
  let first: Awaited<ReturnType<typeof search>> | undefined;
  const most = await mostRowsRead(async () => (first = await search()));
  expect(first!.edges).toEqual([]);
  expect(first!.pageInfo.hasNextPage).toBe(true);
  expect(first!.pageInfo.endCursor).toEqual(expect.any(String));
  // The largest walked window (they double from two windows, up to WALK_WINDOWS windows of rows in all).
  expect(most).toBeLessThanOrEqual(WALK_WINDOWS * EVENT_WINDOW);
  // Paged on: alpha's matches, newest first, every one once.
  const seen: number[] = [];
  let after = first!.pageInfo.endCursor ?? undefined;
  for (let pages = 0; seen.length < 60 && pages < 10; pages++) {
    const page = await search(after);
    for (const e of page.edges) {
      expect(e.node.session.id).toBe(alpha);
      seen.push(e.node.seq);
    }
    expect(page.pageInfo.hasNextPage).toBe(true);
    after = page.pageInfo.endCursor ?? undefined;
  }
  expect(seen).toEqual(matches.slice(0, 60));
  // Beta searching its own word is unaffected: its newest rows.
  const r = await app.gql(SEARCH, { q: 'chatter', first: 5 }, B);
  expect(r.data!.searchSessions.edges.map((e: { node: { session: { id: string } } }) => e.node.session.id)).toEqual(Array(5).fill(beta));
}, 120_000);
