// `npm run bench`: prints a table and writes bench/results.json. Each section
// measures forkline and a raw-SQL baseline in the same run. BENCH_QUICK=1: small N.
// BENCH_ONLY=append,fork runs a subset.
import fs from 'node:fs';
import { openBenchContext, QUICK } from './context.ts';
import { benchAppend } from './append.ts';
import { benchFork } from './fork.ts';
import { benchReadPage } from './read-page.ts';
import { benchTurn } from './turn.ts';
import { benchTurns } from './turns.ts';
import { benchReadThroughput } from './read-throughput.ts';
import { benchEventPagesCache } from './event-pages-cache.ts';
import { benchSessionsList, benchSubscriptionFanout } from './subscriptions.ts';
import { benchSearch } from './search.ts';
import { benchSearchScale } from './search-scale.ts';
import { benchFiles } from './files.ts';
import { benchCompaction } from './compaction.ts';
import { benchRunner } from './runner.ts';
import { benchBulkImport } from './bulk-import.ts';
import { benchScaleOut } from './scale-out.ts';
import { benchDashboardScroll } from './dashboard-scroll.ts';
import { benchSessionTotals } from './session-totals.ts';

const sections: Record<string, (ctx: Awaited<ReturnType<typeof openBenchContext>>) => Promise<Record<string, unknown>>> = {
  append: benchAppend,
  fork: benchFork,
  readPage: benchReadPage,
  turn: benchTurn,
  turns: benchTurns,
  readThroughput: benchReadThroughput,
  eventPagesCache: benchEventPagesCache,
  subscriptionFanout: benchSubscriptionFanout,
  sessionsList: benchSessionsList,
  search: benchSearch,
  searchScale: benchSearchScale,
  files: benchFiles,
  compaction: benchCompaction,
  runner: benchRunner,
  bulkImport: benchBulkImport,
  scaleOut: benchScaleOut,
  dashboardScroll: benchDashboardScroll,
  sessionTotals: benchSessionTotals,
};

async function main() {
  const only = process.env.BENCH_ONLY?.split(',').filter(Boolean);
  const ctx = await openBenchContext();
  const results: Record<string, unknown> = { quick: QUICK, node: process.version, at: new Date().toISOString() };
  try {
    for (const [name, run] of Object.entries(sections)) {
      if (only && !only.includes(name)) continue;
      process.stdout.write(`running ${name}…\n`);
      results[name] = await run(ctx);
    }
  } finally {
    await ctx.close();
  }
  fs.writeFileSync(new URL('./results.json', import.meta.url), `${JSON.stringify(results, null, 2)}\n`);
  for (const [name, figures] of Object.entries(results)) {
    if (typeof figures !== 'object' || figures === null) continue;
    console.log(`\n${name}`);
    console.table(figures);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
