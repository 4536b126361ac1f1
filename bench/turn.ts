// turn: one scripted turn (the message in, 7 events written) on a 2,000-event
// and a 200,000-event session (20,000 with BENCH_QUICK=1). The agent keeps its
// fold between turns, so a turn reads only the new events: goal warm ratio
// long/short <= 1.5. The cold turn (fold replayed once from the log) is shown too.
import { createApp } from '../src/app.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';

const scope = { tenant: 'local' };

export async function benchTurn(ctx: BenchContext) {
  const long = QUICK ? 20_000 : 200_000;
  const warmTurns = QUICK ? 10 : 30;
  let rowsRead = 0;
  // A window no request here reaches: the turn is measured without compaction (the compaction section measures that).
  const app = await createApp({
    databaseUrl: ctx.databaseUrl,
    log: () => {},
    budget: { defaultContextTokens: 100_000_000 },
    onQuery: (sql, rows) => {
      if (/FROM "Event"/.test(sql)) rowsRead += rows;
    },
  });
  try {
    const { controller, host } = app.services;
    const turn = async (id: string) => {
      const t = performance.now();
      await controller.sendMessage(scope, id, 'hello');
      await host.idle();
      return performance.now() - t;
    };
    const measure = async (events: number) => {
      const s = await createLongSession(ctx, events);
      const cold = await turn(s.id);
      rowsRead = 0;
      const times: number[] = [];
      for (let i = 0; i < warmTurns; i++) times.push(await turn(s.id));
      const after = (await app.services.store.requireSession(scope, s.id)).eventCount;
      return {
        cold,
        warm: percentile(
          times.sort((a, b) => a - b),
          50,
        ),
        rowsPerTurn: rowsRead / warmTurns,
        events: after,
      };
    };
    const short = await measure(2_000);
    const longer = await measure(long);
    return {
      shortEvents: 2_000,
      longEvents: long,
      shortWarmP50Ms: round(short.warm),
      longWarmP50Ms: round(longer.warm),
      ratio: round(longer.warm / short.warm),
      shortColdMs: round(short.cold),
      longColdMs: round(longer.cold),
      eventRowsReadPerWarmTurn: round(longer.rowsPerTurn, 1),
      goal: 'ratio <= 1.5 (warm turns)',
    };
  } finally {
    await app.close();
  }
}
