// searchScale: the first page of searchSessions as the corpus grows.
// A corpus of small sessions (8 events each, an input and an answer with
// text), written in bulk inside Postgres, measured at 10,000 sessions and
// again after it grows to 1,000,000 (100,000 with BENCH_QUICK=1); then a
// match in a root shared by 50 forks, and by 5,000, made through fanOut and
// searched right after, before autovacuum has analysed them. Three queries: a rare
// word (one session), a phrase in 1 session in 8, a word in every session,
// at both sizes and again at the large one after another tenant has written
// 3,000 answers without the words (newer than every match: the window a page
// reads in order holds none of them).
// Goal: each first page at the large size within 2x of the small one.
import { createApp } from '../src/app.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';
import { searchOverHttp } from './search.ts';

const SMALL = 10_000;
const LARGE = QUICK ? 100_000 : 1_000_000;
const SMALL_TREE = 50;
const LARGE_TREE = 5_000;
const RARE = 'quokka';
const PHRASE = '"amber lighthouse"';
const COMMON = 'ordinary';
const TREE_WORD = 'beacon';

/** Sessions from+1..to: ids, texts and timestamps from i (session i is i ms after the epoch of the bench). */
export async function addSessions({ db }: BenchContext, from: number, to: number) {
  const base = `'2026-01-01T00:00:00Z'::timestamptz + (i || ' milliseconds')::interval`;
  await db.pool.query(
    `WITH s AS (INSERT INTO "Session" (id, "treeId", tenant, title, status, "formatVersion", "eventCount", "turnCount", "createdAt", "updatedAt")
     SELECT 'ses_scale_' || lpad(i::text, 7, '0'), 'ses_scale_' || lpad(i::text, 7, '0'), 'local', 'scale session ' || i, 'IDLE', 4, 8, 1, ${base}, ${base}
       FROM generate_series($1::int + 1, $2::int) AS i RETURNING id, "treeId")
     INSERT INTO "SessionTree" (id, "treeId") SELECT id, "treeId" FROM s`,
    [from, to],
  );
  await db.pool.query(
    `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "createdAt", tenant)
     SELECT 'ses_scale_' || lpad(i::text, 7, '0'), k, 'ses_scale_' || lpad(i::text, 7, '0'), t.type, t.data, false, CASE WHEN k = 1 THEN 1 ELSE 0 END, ${base}, 'local'
       FROM generate_series($1::int + 1, $2::int) AS i, generate_series(0, 7) AS k,
            LATERAL (SELECT
              (ARRAY['session/title','inbox/add','inbox/remove','turn/start','step/start','model/message','step/end','turn/end'])[k + 1] AS type,
              CASE k WHEN 0 THEN jsonb_build_object('title', 'scale session ' || i)
                     WHEN 1 THEN jsonb_build_object('inputId', 'in_1', 'text', 'question ' || i || ' about the weather'
                                   || CASE WHEN i % 8 = 0 THEN ' near the amber lighthouse' ELSE '' END
                                   || CASE WHEN i = ${SMALL / 2} THEN ' and a ${RARE}' ELSE '' END)
                     WHEN 2 THEN jsonb_build_object('inputId', 'in_1', 'reason', 'taken')
                     WHEN 3 THEN jsonb_build_object('turn', 1, 'inputId', 'in_1')
                     WHEN 4 THEN jsonb_build_object('turn', 1, 'step', 1)
                     WHEN 5 THEN jsonb_build_object('turn', 1, 'step', 1, 'text', 'Echo: question ' || i || ', an ${COMMON} answer', 'toolCalls', '[]'::jsonb)
                     WHEN 6 THEN jsonb_build_object('turn', 1, 'step', 1, 'reason', 'completed')
                     ELSE jsonb_build_object('turn', 1, 'reason', 'completed') END AS data) AS t`,
    [from, to],
  );
  // Settled before measuring (autovacuum would otherwise run during it): visibility map, statistics.
  await db.pool.query('VACUUM ANALYZE "Event"');
  await db.pool.query('VACUUM ANALYZE "Session"');
}

/** Another tenant's burst: `n` answers in one session of its own, newer than everything before. */
async function otherTenantBurst({ db }: BenchContext, n: number) {
  await db.pool.query(`INSERT INTO "SessionTree" (id, "treeId") VALUES ('ses_scale_burst', 'ses_scale_burst')`);
  await db.pool.query(
    `INSERT INTO "Session" (id, "treeId", tenant, title, status, "formatVersion", "eventCount", "turnCount", "createdAt", "updatedAt")
     VALUES ('ses_scale_burst', 'ses_scale_burst', 'other', 'burst', 'IDLE', 4, $1, 0, now(), now())`,
    [n],
  );
  await db.pool.query(
    `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "createdAt", tenant)
     SELECT 'ses_scale_burst', k, 'ses_scale_burst', 'model/message', jsonb_build_object('turn', 1, 'step', k, 'text', 'chatter ' || k, 'toolCalls', '[]'::jsonb), false, 0, now(), 'other'
       FROM generate_series(0, $1::int - 1) AS k`,
    [n],
  );
}

const FAN_OUT = `mutation FanOut($input: FanOutInput!) { fanOut(input: $input) { children { id } } }`;

/**
 * `count` forks of `rootId` made as users make them: fanOut over GraphQL, 16
 * variants a call (titles only), each cut at the root's last turn end. Nothing
 * analyses the tables afterwards: the search right after the burst plans with
 * statistics that have not seen it.
 */
async function fanOutForks(url: string, rootId: string, from: number, count: number) {
  for (let made = 0; made < count;) {
    const n = Math.min(16, count - made);
    const variants = Array.from({ length: n }, (_, i) => ({ title: `variant ${from + made + i}` }));
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: FAN_OUT, variables: { input: { sessionId: rootId, variants } } }),
    });
    const body = (await res.json()) as { errors?: unknown };
    if (body.errors) throw new Error(`fanOut failed: ${JSON.stringify(body.errors)}`);
    made += n;
  }
}

export async function benchSearchScale(ctx: BenchContext) {
  const { store, databaseUrl } = ctx;
  const runs = QUICK ? 20 : 50;
  const app = await createApp({ databaseUrl, log: () => {} });
  try {
    const search = (q: string) => searchOverHttp(app.url, q);
    const p50 = async (q: string, expect: (hits: Array<{ descendants: number }>) => boolean) => {
      const hits = await search(q);
      if (!expect(hits)) throw new Error(`unexpected hits for ${q}: ${JSON.stringify(hits).slice(0, 300)}`);
      for (let i = 0; i < 5; i++) await search(q); // warm-up: plans, buffers
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const t = performance.now();
        await search(q);
        times.push(performance.now() - t);
      }
      return round(
        percentile(
          times.sort((a, b) => a - b),
          50,
        ),
      );
    };
    const queries = async () => ({
      rare: await p50(RARE, (h) => h.length === 1),
      phrase: await p50(PHRASE, (h) => h.length === 20),
      common: await p50(COMMON, (h) => h.length === 20),
    });
    let t = performance.now();
    await addSessions(ctx, 0, SMALL);
    const buildSmallS = round((performance.now() - t) / 1000, 1);
    const small = await queries();
    t = performance.now();
    await addSessions(ctx, SMALL, LARGE);
    const buildLargeS = round((performance.now() - t) / 1000, 1);
    const large = await queries();
    await otherTenantBurst(ctx, 3000);
    const burst = await queries();

    // A fork tree: the root's answer holds the word; its forks share it.
    const root = await store.createSession({ tenant: 'local' }, { title: 'tree root' });
    await store.append(root.id, [
      { type: 'inbox/add', data: { inputId: 'in_1', text: 'Where is the light?' } },
      { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: `The ${TREE_WORD} is lit every night.`, toolCalls: [] } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ]);
    await fanOutForks(app.url, root.id, 0, SMALL_TREE);
    const treeSmall = await p50(TREE_WORD, (h) => h.length === 1 && h[0].descendants === SMALL_TREE);
    t = performance.now();
    await fanOutForks(app.url, root.id, SMALL_TREE, LARGE_TREE - SMALL_TREE);
    const fanOutS = round((performance.now() - t) / 1000, 1);
    const treeLarge = await p50(TREE_WORD, (h) => h.length === 1 && h[0].descendants > SMALL_TREE);
    const ratio = (a: number, b: number) => round(a / b, 2);
    return {
      small: SMALL,
      large: LARGE,
      buildSmallS,
      buildLargeS,
      rareSmallP50Ms: small.rare,
      rareLargeP50Ms: large.rare,
      rareRatio: ratio(large.rare, small.rare),
      phraseSmallP50Ms: small.phrase,
      phraseLargeP50Ms: large.phrase,
      phraseRatio: ratio(large.phrase, small.phrase),
      commonSmallP50Ms: small.common,
      commonLargeP50Ms: large.common,
      commonRatio: ratio(large.common, small.common),
      afterOtherTenantBurstP50Ms: `rare ${burst.rare}, phrase ${burst.phrase}, common ${burst.common}`,
      afterOtherTenantBurstRatio: round(Math.max(burst.rare / small.rare, burst.phrase / small.phrase, burst.common / small.common), 2),
      [`tree${SMALL_TREE}P50Ms`]: treeSmall,
      [`tree${LARGE_TREE}P50Ms`]: treeLarge,
      treeRatio: ratio(treeLarge, treeSmall),
      treeFanOutS: fanOutS,
      goal: 'each ratio <= 2 (first page at the large size vs the small one)',
    };
  } finally {
    await app.close();
  }
}
