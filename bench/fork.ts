// fork: fork at the last event of a 1,000-event and a 1,000,000-event session
// (100,000 with BENCH_QUICK=1), mid-step so the fork also writes closers.
// Goals (DESIGN §3.1, the prefix is shared, not copied): p50 < 20 ms at the
// large size, ratio large/small <= 1.5, and a fork stores only its own rows.
// Baselines in the same run: the raw floor of a fork (one session row and one
// event row in a transaction) and what copying the prefix costs (INSERT … SELECT).
import { percentile, QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';

const scope = { tenant: 'local' };

export async function benchFork(ctx: BenchContext) {
  const { store, db } = ctx;
  const small = 1_000;
  const large = QUICK ? 100_000 : 1_000_000;
  const reps = QUICK ? 20 : 50;
  const measure = async (events: number) => {
    const parent = await createLongSession(ctx, events, { openStep: true });
    await store.fork(scope, parent.id, events - 1); // warm-up
    const times: number[] = [];
    let child = '';
    for (let i = 0; i < reps; i++) {
      const t = performance.now();
      const f = await store.fork(scope, parent.id, events - 1);
      times.push(performance.now() - t);
      child = f.session.id;
    }
    times.sort((a, b) => a - b);
    const { rows } = await db.pool.query<{ rows: number; bytes: number }>(
      `SELECT (SELECT count(*)::int FROM "Event" WHERE "sessionId" = $1) AS rows,
              ((SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM "Event" e WHERE "sessionId" = $1)
               + (SELECT pg_column_size(s.*) FROM "Session" s WHERE id = $1))::int AS bytes`,
      [child],
    );
    return { parent, p50: percentile(times, 50), p99: percentile(times, 99), ownRows: rows[0].rows, bytes: rows[0].bytes };
  };
  const s = await measure(small);
  const l = await measure(large);

  // The floor: a session row (with its directory entry) and one event row, in one transaction, from plain SQL.
  // A child lies in its parent's tree (the parent is a root: its own).
  const floor: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t = performance.now();
    await store.transaction(async (c) => {
      const id = `ses_rawfork_${i}_${Date.now()}`;
      await c.query(`INSERT INTO "SessionTree" (id, "treeId") VALUES ($1, $2)`, [id, l.parent.id]);
      await c.query(`INSERT INTO "Session" (id, tenant, "treeId", "parentId", "forkedAtSeq") VALUES ($1, 'bench', $2, $2, $3)`, [id, l.parent.id, large - 1]);
      await c.query(`INSERT INTO "Event" ("sessionId", seq, "treeId", type, data) VALUES ($1, $2, $3, 'session/end-seed', '{}')`, [id, large, l.parent.id]);
    });
    floor.push(performance.now() - t);
  }
  floor.sort((a, b) => a - b);
  // What a copying fork of the large session costs (the previous storage), once.
  const copyTarget = await store.createSession({ tenant: 'bench' }, {});
  const t = performance.now();
  await db.pool.query(
    `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "createdAt")
     SELECT $1, seq, $1, type, data, synthetic, "createdAt" FROM "Event" WHERE "sessionId" = $2 AND seq < $3`,
    [copyTarget.id, l.parent.id, large],
  );
  const copyMs = performance.now() - t;

  return {
    smallEvents: small,
    largeEvents: large,
    smallP50Ms: round(s.p50),
    largeP50Ms: round(l.p50),
    largeP99Ms: round(l.p99),
    ratio: round(l.p50 / s.p50),
    rawFloorP50Ms: round(percentile(floor, 50)),
    rawCopyPrefixMs: round(copyMs, 0),
    ownRowsPerFork: l.ownRows,
    bytesPerFork: l.bytes,
    goal: 'largeP50Ms < 20, ratio <= 1.5, a fork stores only its own rows',
  };
}
