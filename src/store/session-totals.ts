// A session's totals (Session.totals): turns, steps, tool calls, tokens and
// the time spent in turns, summed in Postgres over the log's turn brackets
// and model answers (one aggregate per lineage segment over the
// (sessionId, type, seq) index), inherited events included. The cost is the
// session's turns and answers, never a read of the log into the process
// (the SQL: SessionLog.segmentTotals).
import type { Lineage } from './lineage.ts';
import { endForkedAtCut } from './fork-cut-times.ts';
import { endInterruptedAtCrash } from './crash-stop-times.ts';
import type { SessionLog } from './session-log.ts';
import { roundUsd } from '../core/turn-summary.ts';

export interface SessionTotals {
  turns: number;
  /** Turns with a turn/end (the others: the one running now). */
  endedTurns: number;
  steps: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  /** US dollars over the answers whose model had a price when they were written; null when none had. */
  costUsd: number | null;
  /** Summed over ended turns, each from its turn/start to its turn/end (a turn a fork closed: to the cut; one a crash ended: to its last event). */
  turnMs: number;
}

export async function sessionTotals(log: Pick<SessionLog, 'segmentTotals' | 'lastOfType' | 'event' | 'range'>, l: Lineage): Promise<SessionTotals> {
  const totals: SessionTotals = { turns: 0, endedTurns: 0, steps: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: null, turnMs: 0 };
  const rows = await log.segmentTotals(l);
  let startMs = 0;
  let endMs = 0;
  let lastStartMs = 0;
  const closedByFork: Array<{ reason: string; endSeq: number; endedAt: Date; writtenMs: number }> = [];
  const closedByCrash: typeof closedByFork = [];
  for (const r of rows) {
    for (const f of r.forked ?? []) closedByFork.push({ reason: 'forked', endSeq: f.seq, endedAt: new Date(f.ms), writtenMs: f.ms });
    for (const c of r.interrupted ?? []) closedByCrash.push({ reason: 'interrupted', endSeq: c.seq, endedAt: new Date(c.ms), writtenMs: c.ms });
    totals.turns += Number(r.starts);
    totals.endedTurns += Number(r.ends);
    totals.steps += Number(r.steps);
    totals.toolCalls += Number(r.calls);
    totals.inputTokens += Number(r.input);
    totals.outputTokens += Number(r.output);
    if (Number(r.costed) > 0) totals.costUsd = roundUsd((totals.costUsd ?? 0) + Number(r.cost));
    startMs += Number(r.start_ms);
    endMs += Number(r.end_ms);
    if (r.last_start_ms !== null) lastStartMs = Math.max(lastStartMs, Number(r.last_start_ms));
  }
  // One turn is open at a time, always the last one: its start has no end to pair with.
  if (totals.turns > totals.endedTurns) startMs -= lastStartMs;
  // Turns a fork closed end at the cut, not when the fork wrote their closers (at most one per fork in the lineage).
  for (const b of await endForkedAtCut(log, l, closedByFork)) endMs -= b.writtenMs - b.endedAt.getTime();
  // Turns crash repair closed end at the crash (the last event before their closers), not at the recovery.
  for (const b of await endInterruptedAtCrash(log, l, closedByCrash)) endMs -= b.writtenMs - b.endedAt.getTime();
  totals.turnMs = Math.max(0, Math.round(endMs - startMs));
  return totals;
}
