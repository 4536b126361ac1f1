// A session's totals (Session.totals): turns, steps, tool calls, tokens and
// the time spent in turns, summed in Postgres over the log's turn brackets
// and model answers (one aggregate per lineage segment over the
// (sessionId, type, seq) index), inherited events included. The cost is the
// session's turns and answers, never a read of the log into the process.
import { segmentsOf, type Lineage } from './lineage.ts';
import { endForkedAtCut } from './fork-cut-times.ts';
import type { Db, SessionLog } from './session-log.ts';

export interface SessionTotals {
  turns: number;
  /** Turns with a turn/end (the others: the one running now). */
  endedTurns: number;
  steps: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  /** Summed over ended turns, each from its turn/start to its turn/end (a turn a fork closed: to the cut). */
  turnMs: number;
}

interface SegmentRow {
  starts: string;
  ends: string;
  steps: string;
  calls: string;
  input: string;
  output: string;
  start_ms: string;
  end_ms: string;
  last_start_ms: string | null;
  /** Seqs of the turn/ends a fork wrote (reason `forked`), with when they were written. */
  forked: Array<{ seq: number; ms: number }> | null;
}

export async function sessionTotals(db: Db, log: SessionLog, l: Lineage): Promise<SessionTotals> {
  const segments = segmentsOf(l, 0, Number.MAX_SAFE_INTEGER);
  const totals: SessionTotals = { turns: 0, endedTurns: 0, steps: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, turnMs: 0 };
  if (segments.length === 0) return totals;
  const params: unknown[] = [];
  const p = (v: unknown) => `$${params.push(v)}`;
  const ms = `round(extract(epoch from "createdAt") * 1000)`; // whole ms, as a Date holds them
  const answer = `FILTER (WHERE type = 'model/message')`;
  const scans = segments.map(
    (seg) =>
      `SELECT count(*) FILTER (WHERE type = 'turn/start') AS starts, count(*) FILTER (WHERE type = 'turn/end') AS ends,` +
      ` count(*) ${answer} AS steps, coalesce(sum(jsonb_array_length(data->'toolCalls')) ${answer}, 0) AS calls,` +
      ` coalesce(sum((data->'usage'->>'inputTokens')::bigint) ${answer}, 0) AS input,` +
      ` coalesce(sum((data->'usage'->>'outputTokens')::bigint) ${answer}, 0) AS output,` +
      ` coalesce(sum(${ms}) FILTER (WHERE type = 'turn/start'), 0) AS start_ms, coalesce(sum(${ms}) FILTER (WHERE type = 'turn/end'), 0) AS end_ms,` +
      ` max(${ms}) FILTER (WHERE type = 'turn/start') AS last_start_ms,` +
      ` json_agg(json_build_object('seq', seq, 'ms', ${ms})) FILTER (WHERE type = 'turn/end' AND data->>'reason' = 'forked') AS forked` +
      ` FROM "Event" WHERE "sessionId" = ${p(seg.sessionId)} AND type IN ('turn/start', 'turn/end', 'model/message')` +
      ` AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)}`,
  );
  const { rows } = await db.query<SegmentRow>(scans.join(' UNION ALL '), params);
  let startMs = 0;
  let endMs = 0;
  let lastStartMs = 0;
  const closedByFork: Array<{ reason: string; endSeq: number; endedAt: Date; writtenMs: number }> = [];
  for (const r of rows) {
    for (const f of r.forked ?? []) closedByFork.push({ reason: 'forked', endSeq: f.seq, endedAt: new Date(f.ms), writtenMs: f.ms });
    totals.turns += Number(r.starts);
    totals.endedTurns += Number(r.ends);
    totals.steps += Number(r.steps);
    totals.toolCalls += Number(r.calls);
    totals.inputTokens += Number(r.input);
    totals.outputTokens += Number(r.output);
    startMs += Number(r.start_ms);
    endMs += Number(r.end_ms);
    if (r.last_start_ms !== null) lastStartMs = Math.max(lastStartMs, Number(r.last_start_ms));
  }
  // One turn is open at a time, always the last one: its start has no end to pair with.
  if (totals.turns > totals.endedTurns) startMs -= lastStartMs;
  // Turns a fork closed end at the cut, not when the fork wrote their closers (at most one per fork in the lineage).
  for (const b of await endForkedAtCut(log, l, closedByFork)) endMs -= b.writtenMs - b.endedAt.getTime();
  totals.turnMs = Math.max(0, Math.round(endMs - startMs));
  return totals;
}
