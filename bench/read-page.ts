// readPage: a page of 100 events through GraphQL (HTTP) at the start, middle
// and end of a 2,000-event and a 1,000,000-event log (100,000 with
// BENCH_QUICK=1), and of a depth-10 nested fork of the long log. Goal: each
// within 1.5x of the 2k figure at the same place (a page costs its rows).
// Baseline in the same run: the same keyset SELECT on the pool, no GraphQL.
import { createApp } from '../src/app.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';

const scope = { tenant: 'local' };
const PAGE = `query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 100) {
  edges { node { id seq type data inherited synthetic createdAt } } pageInfo { hasNextPage } } } }`;

export async function benchReadPage(ctx: BenchContext) {
  const { store, db, databaseUrl } = ctx;
  const large = QUICK ? 100_000 : 1_000_000;
  const runs = QUICK ? 50 : 200;
  const short = await createLongSession(ctx, 2_000);
  const long = await createLongSession(ctx, large);
  // Depth 10: each level forks the previous one at its end and appends 1,000 events of its own.
  let nested = long.id;
  for (let depth = 0; depth < 10; depth++) {
    const { session } = await store.fork(scope, nested, (await store.requireSession(scope, nested)).eventCount - 1);
    for (let i = 0; i < 1000; i += 500) {
      await store.append(
        session.id,
        Array.from({ length: 500 }, (_, j) => ({ type: 'plugin/bench/own', data: { depth, i: i + j } })),
      );
    }
    nested = session.id;
  }
  const nestedCount = (await store.requireSession(scope, nested)).eventCount;

  const app = await createApp({ databaseUrl, log: () => {} });
  try {
    const page = async (id: string, after: number) => {
      const res = await fetch(app.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ query: PAGE, variables: { id, after } }),
      });
      const body = (await res.json()) as { data?: { session: { events: { edges: unknown[] } } }; errors?: unknown };
      if (!body.data || body.data.session.events.edges.length !== 100) throw new Error(`page failed: ${JSON.stringify(body.errors)}`);
    };
    const time = async (fn: () => Promise<unknown>) => {
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const t = performance.now();
        await fn();
        times.push(performance.now() - t);
      }
      return percentile(
        times.sort((a, b) => a - b),
        50,
      );
    };
    const at = (count: number) => ({ start: -1, middle: Math.floor(count / 2), end: count - 101 });
    const results: Record<string, number> = {};
    const targets = [
      ['2k', short.id, 2_000],
      ['long', long.id, large],
      ['nested10', nested, nestedCount],
    ] as const;
    // Warm every path first, so that the first figures measured do not carry the JIT's warm-up.
    for (let i = 0; i < 30; i++) for (const [, id, count] of targets) for (const after of Object.values(at(count))) await page(id, after);
    for (const [name, id, count] of targets) {
      for (const [where, after] of Object.entries(at(count))) results[`${name}.${where}`] = await time(() => page(id, after));
    }
    // A page across the boundary between two inherited ranges of the nested fork.
    results['nested10.acrossRanges'] = await time(() => page(nested, large + 950));
    const raw = await time(() =>
      db.pool.query(`SELECT seq, type, data, synthetic, "createdAt" FROM "Event" WHERE "sessionId" = $1 AND seq > $2 ORDER BY seq LIMIT 100`, [short.id, 999]),
    );
    const worst = Math.max(
      ...(['long', 'nested10'] as const).flatMap((n) => (['start', 'middle', 'end'] as const).map((w) => results[`${n}.${w}`] / results[`2k.${w}`])),
    );
    return {
      largeEvents: large,
      nestedEvents: nestedCount,
      ...Object.fromEntries(Object.entries(results).map(([k, v]) => [`${k}P50Ms`, round(v)])),
      rawSqlPageP50Ms: round(raw),
      worstRatioTo2k: round(worst),
      goal: 'every long / nested page <= 1.5x the 2k page at the same place',
    };
  } finally {
    await app.close();
  }
}
