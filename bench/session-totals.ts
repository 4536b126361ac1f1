// sessionTotals: the dashboard's session header (Session.totals) over HTTP on
// sessions of 200 and 200,000 events (BENCH_TOTALS_EVENTS=a,b; 20,000 with
// BENCH_QUICK=1), written in bulk. Per read: the wall time, and the CPU time
// of this process (the server) and of Postgres's processes. "first read": no
// checkpoint yet (every read before them, and a session's first read after
// the upgrade): the log summed whole, one checkpoint kept. "later reads": from
// the checkpoint, as the header reads again. "migration's fill": its statement
// that keeps a checkpoint for each existing log, over the database as it is then.
import fs from 'node:fs';
import { postmasterOf, processTotals } from './turns.ts';
import { QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';
import { createApp } from '../src/app.ts';

const SIZES = (process.env.BENCH_TOTALS_EVENTS ?? (QUICK ? '200,20000' : '200,200000')).split(',').map(Number);
const FIRST_READS = 5;
const migration = fs.readFileSync(new URL('../prisma/migrations/2026122505_totals_checkpoints/migration.sql', import.meta.url), 'utf8');
const FILL = migration.slice(migration.indexOf('INSERT INTO "TotalsCheckpoint"'));
const LATER_READS = 40;

export async function benchSessionTotals(ctx: BenchContext): Promise<Record<string, unknown>> {
  const app = await createApp({ databaseUrl: ctx.databaseUrl, log: () => {} });
  const postmaster = await postmasterOf(ctx.db.pool);
  const postgresCpuMs = () =>
    postmaster === undefined ? NaN : processTotals((pid, _comm, ppid) => pid === postmaster || ppid === postmaster, postmaster).cpuMs;
  const nodeCpuMs = () => {
    const { user, system } = process.cpuUsage();
    return (user + system) / 1000;
  };
  const read = async (id: string) => {
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        query: 'query($id: ID!) { session(id: $id) { totals { turns steps toolCalls inputTokens costUsd turnMs } } }',
        variables: { id },
      }),
    });
    const body = (await res.json()) as { data?: { session: { totals: { turns: number } } }; errors?: unknown };
    if (!body.data) throw new Error(`totals read failed: ${JSON.stringify(body.errors)}`);
    return body.data.session.totals;
  };
  /** Per read: median wall ms, and mean CPU ms of the server and of Postgres (CPU is counted in 10 ms ticks: summed over all reads). */
  const measure = async (reads: number, before: () => Promise<void>, id: string) => {
    const walls: number[] = [];
    let node = 0;
    let pgCpu = 0;
    for (let i = 0; i < reads; i++) {
      await before();
      const n0 = nodeCpuMs();
      const p0 = postgresCpuMs();
      const t = performance.now();
      await read(id);
      walls.push(performance.now() - t);
      node += nodeCpuMs() - n0;
      pgCpu += postgresCpuMs() - p0;
    }
    walls.sort((a, b) => a - b);
    return `${round(walls[Math.floor(walls.length / 2)])} ms (server ${round(node / reads)} + postgres ${round(pgCpu / reads)} ms CPU)`;
  };
  const figures: Record<string, unknown> = {};
  try {
    for (const events of SIZES) {
      const s = await createLongSession(ctx, events);
      const label = `${events.toLocaleString('en-US')} events (${s.turns.toLocaleString('en-US')} turns)`;
      for (let i = 0; i < 10; i++) await read(s.id); // warm: the server's code compiled, the rows cached
      const dropCheckpoints = async () => {
        await ctx.db.pool.query(`DELETE FROM "TotalsCheckpoint" WHERE "sessionId" = $1`, [s.id]);
      };
      figures[`${label}: first read`] = await measure(FIRST_READS, dropCheckpoints, s.id);
      await ctx.db.pool.query(`DELETE FROM "TotalsCheckpoint"`);
      const t = performance.now();
      await ctx.db.pool.query(FILL);
      figures[`${label}: migration's fill (ms)`] = round(performance.now() - t);
      await read(s.id);
      figures[`${label}: later reads`] = await measure(LATER_READS, async () => {}, s.id);
    }
  } finally {
    await app.close();
  }
  return figures;
}
