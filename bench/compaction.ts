// compaction: the model request's size with automatic compaction
// on (the default budget: a 128,000-token window, compacted at 80 %) after a
// session of 10k / 100k / 1M events gets a message — it must stay under the
// budget — and the cold first turn (a fresh process, no fold) on the longest
// session with and without a compaction: with one, it reads from the last
// compaction instead of replaying from seq 0; without one, the first turn
// replays and leaves a fold checkpoint, and the next fresh process starts from
// it (coldTurnFromCheckpoint). BENCH_QUICK=1: 1k / 10k / 50k.
import { createApp, type App } from '../src/app.ts';
import { estimateRequestTokens, compactionThreshold, SCRIPTED_CONTEXT_TOKENS } from '../src/agent/context-budget.ts';
import { QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';

const scope = { tenant: 'local' };
const SIZES = QUICK ? [1_000, 10_000, 50_000] : [10_000, 100_000, 1_000_000];
/** A window no request of these sessions reaches: nothing is compacted (the "without" case). */
const NO_COMPACTION = { defaultContextTokens: 100_000_000 };

export async function benchCompaction(ctx: BenchContext) {
  let rowsRead = 0;
  const open = (budget?: { defaultContextTokens?: number }) =>
    createApp({
      databaseUrl: ctx.databaseUrl,
      log: () => {},
      budget,
      onQuery: (sql, rows) => {
        if (/FROM "Event"/.test(sql)) rowsRead += rows;
      },
    });
  /** One message answered, timed, with the event rows it read and the request the model was sent. */
  const firstTurn = async (app: App, id: string, text: string) => {
    rowsRead = 0;
    const before = app.models.scripted.requestCount;
    const t = performance.now();
    await app.services.controller.sendMessage(scope, id, text);
    await app.services.host.idle();
    const ms = performance.now() - t;
    const request = app.models.scripted.lastRequest!;
    return { ms, rows: rowsRead, modelCalls: app.models.scripted.requestCount - before, tokens: estimateRequestTokens(request.messages, request.tools) };
  };
  const out: Record<string, unknown> = {};
  // The scripted model's window: the one the sessions' requests are compacted against.
  const budget = compactionThreshold(SCRIPTED_CONTEXT_TOKENS);
  let longest = '';
  // Request size with automatic compaction on.
  let app = await open();
  try {
    for (const n of SIZES) {
      const s = await createLongSession(ctx, n);
      const r = await firstTurn(app, s.id, 'hello');
      const compactions = (await app.services.store.log.ofTypes(s.id, ['plugin/compaction/end'], { fromSeq: 0, toSeq: 2 ** 31 - 1, limit: 10 })).length;
      out[`requestTokens@${n}`] = r.tokens;
      out[`firstTurnMs@${n}`] = round(r.ms);
      out[`compactions@${n}`] = compactions;
      out[`summaryModelCalls@${n}`] = r.modelCalls - 1;
      if (r.tokens > budget) throw new Error(`the request after ${n} events holds ${r.tokens} tokens, over the budget of ${budget}`);
      longest = s.id;
    }
  } finally {
    await app.close();
  }
  out.budgetTokens = budget;
  const n = SIZES.at(-1)!;
  // Cold first turn in a fresh process: the longest session now holds a compaction near its end.
  app = await open();
  try {
    const withCompaction = await firstTurn(app, longest, 'hello again');
    out[`coldTurnWithCompactionMs@${n}`] = round(withCompaction.ms);
    out[`coldTurnWithCompactionRows@${n}`] = withCompaction.rows;
  } finally {
    await app.close();
  }
  // The same length without a compaction (a window nothing reaches): the fold replays from seq 0.
  const plain = await createLongSession(ctx, n);
  app = await open(NO_COMPACTION);
  try {
    const without = await firstTurn(app, plain.id, 'hello');
    out[`coldTurnWithoutCompactionMs@${n}`] = round(without.ms);
    out[`coldTurnWithoutCompactionRows@${n}`] = without.rows;
    out.coldRatio = round(without.ms / (out[`coldTurnWithCompactionMs@${n}`] as number));
  } finally {
    await app.close(); // waits for the fold checkpoint that replay left (docs/long-sessions.md "Cold starts")
  }
  // The same session's first message in another fresh process: from that checkpoint, the whole history still sent.
  app = await open(NO_COMPACTION);
  try {
    const fromCheckpoint = await firstTurn(app, plain.id, 'hello again');
    out[`coldTurnFromCheckpointMs@${n}`] = round(fromCheckpoint.ms);
    out[`coldTurnFromCheckpointRows@${n}`] = fromCheckpoint.rows;
  } finally {
    await app.close();
  }
  out.goal =
    'requestTokens <= budgetTokens at every size; a cold turn after a compaction reads <= 10,000 event rows; a cold turn from a checkpoint (no compaction) < 2 s at 1M';
  return out;
}
