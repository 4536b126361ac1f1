// A session's totals (Session.totals): turns, steps, tool calls, tokens and
// the time spent in turns, summed in Postgres over the log's turn brackets
// and model answers (one aggregate per lineage segment over the
// (sessionId, type, seq) index, SessionLog.segmentTotals), inherited events
// included. Sums are additive over the log, so a read starts from the nearest
// checkpoint (totals-checkpoints.ts) and sums only the events after it; one
// that summed many keeps a new checkpoint where it stopped. The cost is the
// turns and answers since a checkpoint, whatever the log's length, never a
// read of the log into the process.
import type { Lineage } from './lineage.ts';
import { endForkedAtCut } from './fork-cut-times.ts';
import { endInterruptedAtCrash } from './crash-stop-times.ts';
import type { SessionLog } from './session-log.ts';
import type { TotalsCheckpoint, TotalsCheckpoints, TotalsSums } from './totals-checkpoints.ts';
import { roundUsd } from '../core/turn-summary.ts';

export interface SessionTotals extends Omit<TotalsSums, 'spanMs' | 'lastStartMs'> {
  /** Summed over ended turns, each from its turn/start to its turn/end (a turn a fork closed: to the cut; one a crash ended: to its last event). */
  turnMs: number;
}

/** The reads totals make: the log's sums and closers' times, and the checkpoints. */
export type TotalsReads = Pick<SessionLog, 'segmentTotals' | 'lastOfType' | 'event' | 'range'> & {
  totalsCheckpoint: TotalsCheckpoints['nearest'];
  keepTotalsCheckpoint: TotalsCheckpoints['keep'];
};

const NONE: TotalsSums = { turns: 0, endedTurns: 0, steps: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: null, spanMs: 0, lastStartMs: 0 };

export async function sessionTotals(log: TotalsReads, l: Lineage): Promise<SessionTotals> {
  const from = await log.totalsCheckpoint(l, l.endSeq === undefined ? undefined : l.endSeq - 1);
  const after = await sumsAfter(log, l, from);
  await log.keepTotalsCheckpoint(l, after.checkpoint, after.summed);
  const s = after.checkpoint.sums;
  const { spanMs, lastStartMs, ...counts } = s;
  // One turn is open at a time, always the last one: its start has no end to pair with.
  const open = s.turns > s.endedTurns ? lastStartMs : 0;
  return { ...counts, turnMs: Math.max(0, Math.round(spanMs + open)) };
}

/** The sums over the log through its last bracket or answer: `from`'s and the events' after it; `summed`: how many were read. */
async function sumsAfter(log: TotalsReads, l: Lineage, from: TotalsCheckpoint | undefined): Promise<{ checkpoint: TotalsCheckpoint; summed: number }> {
  const totals = { ...(from?.sums ?? NONE) };
  let seq = from?.seq ?? -1;
  let summed = 0;
  const closedByFork: Array<{ reason: string; endSeq: number; endedAt: Date; writtenMs: number }> = [];
  const closedByCrash: typeof closedByFork = [];
  for (const r of await log.segmentTotals(l, seq + 1)) {
    for (const f of r.forked ?? []) closedByFork.push({ reason: 'forked', endSeq: f.seq, endedAt: new Date(f.ms), writtenMs: f.ms });
    for (const c of r.interrupted ?? []) closedByCrash.push({ reason: 'interrupted', endSeq: c.seq, endedAt: new Date(c.ms), writtenMs: c.ms });
    summed += Number(r.starts) + Number(r.ends) + Number(r.steps);
    totals.turns += Number(r.starts);
    totals.endedTurns += Number(r.ends);
    totals.steps += Number(r.steps);
    totals.toolCalls += Number(r.calls);
    totals.inputTokens += Number(r.input);
    totals.outputTokens += Number(r.output);
    if (Number(r.costed) > 0) totals.costUsd = roundUsd((totals.costUsd ?? 0) + Number(r.cost));
    totals.spanMs += Number(r.span_ms);
    if (r.last_start_ms !== null) totals.lastStartMs = Math.max(totals.lastStartMs, Number(r.last_start_ms));
    if (r.last_seq !== null) seq = Math.max(seq, r.last_seq);
  }
  // Turns a fork closed end at the cut, not when the fork wrote their closers (at most one per fork in the lineage).
  for (const b of await endForkedAtCut(log, l, closedByFork)) totals.spanMs -= b.writtenMs - b.endedAt.getTime();
  // Turns crash repair closed end at the crash (the last event before their closers), not at the recovery.
  for (const b of await endInterruptedAtCrash(log, l, closedByCrash)) totals.spanMs -= b.writtenMs - b.endedAt.getTime();
  return { checkpoint: { seq, sums: totals }, summed };
}
