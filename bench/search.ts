// search: searchSessions over HTTP for a phrase in one model message of a
// 200,000-event session (100,000 with BENCH_QUICK=1) that three forks share,
// and for a word in every answer of that session (the worst case: every
// match is ranked). Goal: phrase p50 < 100 ms. Baseline in the same run: the
// ranked SQL alone on the pool (index scan, ts_rank, top 20; no tenant join,
// snippets or descendants).
import { createApp } from '../src/app.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';

const scope = { tenant: 'local' };
const PHRASE = '"fresnel lens"';
/** In every answer of the long session, and nowhere else in the bench's data. */
const COMMON = 'zanzibar';
const SEARCH = `query($q: String!) { searchSessions(query: $q, first: 20) {
  edges { cursor node { kind seq snippet rank descendants session { id title } } } pageInfo { hasNextPage endCursor } } }`;
const RAW = `SELECT "sessionId", seq, ts_rank("searchVector", websearch_to_tsquery('english', $1)) AS rank
               FROM "Event" WHERE "searchVector" @@ websearch_to_tsquery('english', $1) ORDER BY rank DESC LIMIT 20`;

/** searchSessions over HTTP, a page of 20: the hits. */
export async function searchOverHttp(url: string, q: string) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: SEARCH, variables: { q } }) });
  const body = (await res.json()) as { data?: { searchSessions: { edges: Array<{ node: { seq: number; descendants: number } }> } }; errors?: unknown };
  if (!body.data) throw new Error(`search failed: ${JSON.stringify(body.errors)}`);
  return body.data.searchSessions.edges.map((e) => e.node);
}

export async function benchSearch(ctx: BenchContext) {
  const { store, db, databaseUrl } = ctx;
  const events = QUICK ? 100_000 : 200_000;
  const runs = QUICK ? 50 : 200;
  const long = await createLongSession(ctx, events - 7, { title: 'search bench', answerSuffix: COMMON });
  const turn = long.turns + 1;
  const written = await store.append(long.id, [
    { type: 'inbox/add', data: { inputId: 'in_needle', text: 'Who looks after the light?' } },
    { type: 'inbox/remove', data: { inputId: 'in_needle', reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId: 'in_needle' } },
    { type: 'step/start', data: { turn, step: 1 } },
    { type: 'model/message', data: { turn, step: 1, text: 'The keeper polished the Fresnel lens at dawn, then logged the ships.', toolCalls: [] } },
    { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn, reason: 'completed' } },
  ]);
  const needleSeq = written[4].seq;
  for (let i = 0; i < 3; i++) await store.fork(scope, long.id, events - 1);
  await db.pool.query('ANALYZE "Event"; ANALYZE "Session"');
  const commonMatches = Number(
    (await db.pool.query(`SELECT count(*) AS n FROM "Event" WHERE "searchVector" @@ websearch_to_tsquery('english', $1)`, [COMMON])).rows[0].n,
  );

  const app = await createApp({ databaseUrl, log: () => {} });
  try {
    const search = (q: string) => searchOverHttp(app.url, q);
    const [hit] = await search(PHRASE);
    if (!hit || hit.seq !== needleSeq || hit.descendants !== 3) throw new Error(`phrase not found as expected: ${JSON.stringify(hit)}`);
    const time = async (n: number, fn: () => Promise<unknown>) => {
      for (let i = 0; i < Math.min(20, n); i++) await fn(); // warm-up: JIT, plans, buffers
      const times: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        await fn();
        times.push(performance.now() - t);
      }
      times.sort((a, b) => a - b);
      return { p50: round(percentile(times, 50)), p99: round(percentile(times, 99)) };
    };
    const phrase = await time(runs, () => search(PHRASE));
    const rawPhrase = await time(runs, () => db.pool.query(RAW, [PHRASE]));
    const common = await time(Math.ceil(runs / 5), () => search(COMMON));
    const rawCommon = await time(Math.ceil(runs / 5), () => db.pool.query(RAW, [COMMON]));
    return {
      events,
      phraseP50Ms: phrase.p50,
      phraseP99Ms: phrase.p99,
      rawPhraseP50Ms: rawPhrase.p50,
      commonMatches,
      commonP50Ms: common.p50,
      commonP99Ms: common.p99,
      rawCommonP50Ms: rawCommon.p50,
      goal: 'phrase p50 < 100 ms',
    };
  } finally {
    await app.close();
  }
}
