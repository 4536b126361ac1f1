// The turn read model: a session's turns and their steps, timing, usage and
// errors, read from the turn brackets and answers of its log (never the whole
// log but for `all`), with the turns a fork closed ending at its cut.
import { summarizeSteps, summarizeTurns, type StepSummary, type TurnSummary } from '../core/turn-summary.ts';
import { dataOf, fieldOf } from '../core/core-event.ts';
import { snapshotOf, type LineageRow } from './lineage.ts';
import { endForkedAtCut } from './fork-cut-times.ts';
import { endInterruptedAtCrash } from './crash-stop-times.ts';
import type { BoundedEvents, LogRef, SessionLog, StoredEvent, TurnTotals } from './session-log.ts';
import type { BoundedText, TextBudget } from '../core/text-budget.ts';

/** A turn as read for a session: its summary and where its log ends. */
export type TurnRow = TurnSummary & {
  sessionId: string;
  lastSeq: number;
  steps?: Promise<StepSummary[]>;
  /** Its totals over all its events, once read (Turn.stepCount, toolCallCount, usage and stepsTruncated share them). */
  totals?: Promise<TurnTotals>;
  /** Its error report without its message, once read (Turn.error, errorSeq and errorCode share the probe). */
  report?: Promise<StoredEvent | undefined>;
  /** Its input's inbox/add without its text, once read (Turn.input and inputSeq share the probe). */
  inputAdd?: Promise<StoredEvent | undefined>;
  /** Its input's text as a list of turns read it (withInputs): whole. */
  input?: BoundedText | null;
};

/** The inbox/add of the input the turn took, without its text but with its length (one index probe), or undefined. */
export const inputAddOf = (log: TurnLog, turn: TurnRow): Promise<StoredEvent | undefined> =>
  (turn.inputAdd ??= log.inboxAddOf(turn.sessionId, turn.inputId, turn.startSeq, { withoutTexts: true }));

/**
 * The text of the input the turn took, as much of it as `budget` gives: its inbox/add found with its text's length
 * (inputAddOf), then the text read within the budget (one statement); made only for a reader that asks (an input can
 * be megabytes: a list of turns does not read them, and many sessions' last turns must not). Each call reads: the
 * caller keeps what it read (graphql/request-texts.ts).
 */
export async function turnInput(log: TurnLog, turn: TurnRow, budget: TextBudget): Promise<BoundedText | null> {
  if (turn.input !== undefined) return turn.input;
  const e = await inputAddOf(log, turn);
  return e ? ((await log.textWithin(turn.sessionId, e.seq, 'text', budget, e.textLength)) ?? null) : null;
}

/**
 * A list of turns whose inputs' texts are asked for, with them read: in one
 * statement, newest first, within what is left of the request's text budget
 * (at most the log's page bytes, FORKLINE_PAGE_BYTES) plus one. Past that the
 * list keeps its newest turns whose inputs were read, from the first of them
 * (an input can be megabytes: a list of 1,000 turns must not hold them all;
 * docs/operations.md "Memory and time"). The list reserves the whole budget
 * while it reads, and settles with what it used: texts asked meanwhile wait for
 * it rather than come cut (TextBudget.takeSettled); a list that finds none left
 * keeps its turns, each input then read (or cut) by turnInput.
 */
export async function withInputs(log: TurnLog, turns: TurnRow[], budget: TextBudget): Promise<TurnRow[]> {
  const last = turns.at(-1);
  if (!last) return turns;
  const reserved = await budget.reserveAll();
  if (reserved === 0) return turns;
  let read: BoundedEvents;
  let used = 0;
  try {
    read = await log.inboxAddsWithin(
      last.sessionId,
      turns.map((t) => t.inputId),
      last.startSeq,
      reserved,
    );
    used = read.bytes ?? reserved;
  } finally {
    budget.settle(reserved, used);
  }
  const texts = new Map(read.events.map((e) => [dataOf(e, 'inbox/add')!.inputId, e]));
  let from = 0;
  if (read.cut) from = turns.findLastIndex((t) => !texts.has(t.inputId)) + 1;
  const kept = turns.slice(from);
  for (const t of kept) {
    const added = texts.get(t.inputId);
    // An input queued again after this turn started (the newest read is later): turnInput reads this turn's own.
    if (added && added.seq > t.startSeq) continue;
    const text = added ? dataOf(added, 'inbox/add')?.text : undefined;
    t.input = text === undefined ? null : { text, length: text.length, truncated: false };
    t.inputAdd = Promise.resolve(added);
  }
  return kept;
}

/** The log reads turns are made of: a tenant's view (tenant-store.ts TenantLog) or the system's SessionLog. */
export type TurnLog = Pick<
  SessionLog,
  'event' | 'firstOfType' | 'inboxAddOf' | 'inboxAddsWithin' | 'lastOfType' | 'ofTypes' | 'range' | 'streamOfTypes' | 'textWithin' | 'turnTotals'
>;

/** Brackets ending when they really stopped: a fork's at its cut, a crash's at its last event (not when their closers were written). */
const endWhenStopped = async <T extends TurnSummary | StepSummary>(log: TurnLog, ref: LogRef, brackets: T[]) =>
  endInterruptedAtCrash(log, ref, await endForkedAtCut(log, ref, brackets));

/** The columns of a session row its turns are read through. */
export type TurnSessionRow = LineageRow & { eventCount: number };

/** The most events stepsOf reads for one turn's steps (three a step): a longer turn lists its first steps only. */
const STEP_EVENTS = 10_000;
/** The most steps a turn's list may ask for (Turn.steps(first:)): what STEP_EVENTS holds of steps of one answer. */
export const MAX_LISTED_STEPS = 3_333;

/**
 * The turn's steps, tool calls and usage, summed in the database over all its events whatever its length (stepsOf
 * lists at most its first steps): what a user bills from is never a part of the turn (docs/api.md "Turns").
 */
export const turnTotalsOf = (log: TurnLog, turn: TurnRow): Promise<TurnTotals> =>
  (turn.totals ??= log.turnTotals(turn.sessionId, turn.startSeq, turn.endSeq ?? turn.lastSeq));

/** The turn's steps: its own events of four types (what the turn costs, not the log; its answers without their words), read once per turn. */
export const stepsOf = (log: TurnLog, turn: TurnRow): Promise<StepSummary[]> =>
  (turn.steps ??= log
    .ofTypes(turn.sessionId, ['turn/start', 'step/start', 'model/message', 'step/end'], {
      fromSeq: turn.startSeq,
      toSeq: turn.endSeq ?? turn.lastSeq,
      limit: STEP_EVENTS,
      withoutTexts: true,
    })
    .then((events) => endWhenStopped(log, turn.sessionId, summarizeSteps(events))));

/**
 * The turn's first `first` steps (1–MAX_LISTED_STEPS), reading no more of the turn than they are: the step/start after
 * them found first (an index probe of `first + 1` rows), then the events before it. A dashboard's turn end draws 50
 * bars; reading a long turn's 3,333 steps for them cost it the whole STEP_EVENTS read per turn end on screen.
 */
export async function firstStepsOf(log: TurnLog, turn: TurnRow, first: number): Promise<StepSummary[]> {
  const toSeq = turn.endSeq ?? turn.lastSeq;
  const starts = await log.ofTypes(turn.sessionId, ['step/start'], { fromSeq: turn.startSeq, toSeq, limit: first + 1, withoutTexts: true });
  if (starts.length <= first) return stepsOf(log, turn);
  const events = await log.ofTypes(turn.sessionId, ['turn/start', 'step/start', 'model/message', 'step/end'], {
    fromSeq: turn.startSeq,
    toSeq: starts[first].seq - 1,
    limit: STEP_EVENTS,
    withoutTexts: true,
  });
  return (await endWhenStopped(log, turn.sessionId, summarizeSteps(events))).slice(0, first);
}

/**
 * Why a failed turn failed: its agent's error report's message (plugin/agent/error), or null; as much of it as
 * `budget` gives (a report can be megabytes, a list of turns asks this of each). Its report found with the message's
 * length (errorReport, one index probe), then the message in one statement. Each call reads: the caller keeps what
 * it read (graphql/request-texts.ts).
 */
export async function turnError(log: TurnLog, turn: TurnRow, budget: TextBudget): Promise<BoundedText | null> {
  const report = await errorReport(log, turn);
  if (!report) return null;
  return (await log.textWithin(turn.sessionId, report.seq, 'message', budget, report.textLength)) ?? { text: '', length: 0, truncated: false };
}

/** The kind of a failed turn's error, when its report names one (`OUTPUT_SCHEMA_MISMATCH`: structured output), or null. */
export async function turnErrorCode(log: TurnLog, turn: TurnRow): Promise<string | null> {
  const code = fieldOf((await errorReport(log, turn)) ?? { data: {} }, 'code');
  return typeof code === 'string' ? code : null;
}

/** A failed turn's error report (plugin/agent/error) without its message but with its length, or undefined. */
export function errorReport(log: TurnLog, turn: TurnRow): Promise<StoredEvent | undefined> | undefined {
  if (turn.reason !== 'failed' || turn.endSeq === null) return undefined;
  // Without its message: read apart within the request's budget (turnError).
  return (turn.report ??= log
    .ofTypes(turn.sessionId, ['plugin/agent/error'], { fromSeq: turn.startSeq + 1, toSeq: turn.endSeq, limit: 1, descending: true, withoutTexts: true })
    .then(([r]) => r));
}

/** A completed turn's structured output: its final answer's parsed value (model/message `output`), or null. One index probe. */
export async function turnOutput(log: TurnLog, turn: TurnRow): Promise<unknown> {
  if (turn.reason !== 'completed' || turn.endSeq === null) return null;
  // Without its words: an answer's text can be megabytes, and a list of turns asks this of each.
  const [answer] = await log.ofTypes(turn.sessionId, ['model/message'], {
    fromSeq: turn.startSeq + 1,
    toSeq: turn.endSeq,
    limit: 1,
    descending: true,
    withoutTexts: true,
  });
  return (answer && dataOf(answer, 'model/message')?.output) ?? null;
}

/**
 * The turn holding event `seq` of the session (`orBefore`: or the last turn
 * before it): its turn/start at or before seq and the first turn/end after
 * that start (one turn is open at a time). A few index probes.
 */
export async function turnHolding(log: TurnLog, s: TurnSessionRow, seq: number, { orBefore = false } = {}): Promise<TurnRow | null> {
  const snapshot = snapshotOf(s);
  const start = await log.lastOfType(snapshot, 'turn/start', seq);
  if (!start) return null;
  const end = await log.firstOfType(snapshot, 'turn/end', start.seq);
  const [turn] = await endWhenStopped(log, snapshot, summarizeTurns(end ? [start, end] : [start]));
  if (!orBefore && turn.endSeq !== null && turn.endSeq < seq) return null;
  return { ...turn, sessionId: s.id, lastSeq: s.eventCount - 1 };
}

/** The session's last `last` turns: reads those turns' brackets, not the log's. */
export async function lastTurns(log: TurnLog, s: TurnSessionRow, last: number): Promise<TurnRow[]> {
  const snapshot = snapshotOf(s);
  const brackets = (
    await log.ofTypes(snapshot, ['turn/start', 'turn/end'], { fromSeq: 0, toSeq: s.eventCount, limit: 2 * last + 1, descending: true })
  ).reverse();
  const from = brackets.findIndex((e) => e.type === 'turn/start'); // a turn/end whose start lies further back is left out
  const turns = (await endWhenStopped(log, snapshot, summarizeTurns(from < 0 ? [] : brackets.slice(from)))).slice(-last);
  return turns.map((turn) => ({ ...turn, sessionId: s.id, lastSeq: s.eventCount - 1 }));
}

/** Every turn of the session, from its turn brackets (streamed; not its inputs' texts: turnInput reads one when asked). */
export async function allTurns(log: TurnLog, s: TurnSessionRow): Promise<TurnRow[]> {
  const snapshot = snapshotOf(s);
  const events: StoredEvent[] = [];
  for await (const e of log.streamOfTypes(snapshot, ['turn/start', 'turn/end'])) events.push(e);
  return (await endWhenStopped(log, snapshot, summarizeTurns(events))).map((turn) => ({ ...turn, sessionId: s.id, lastSeq: s.eventCount - 1 }));
}
