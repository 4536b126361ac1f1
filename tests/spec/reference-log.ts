// The fork/repair contract as data (docs/contract.md#repair, docs/contract.md#exact-fork, docs/contract.md#branch): one
// reference log; for an exact cut at every seq, the closers a child must get;
// for a turn-level branch, the anchor → cut rows. tests/spec/fork-spec.ts runs
// these rows against the pure core, the store and the GraphQL API.
import type { LogEvent, NewEvent } from '../../src/core/events.ts';
import { foldLog, type OpenTail } from '../../src/core/log-state.ts';
import { textTurn } from '../helpers/text-turn.ts';

const call = (id: string, name: string) => ({ id, name, arguments: '{}' });
const result = (turn: number, step: number, callId: string, status = 'ok') => ({
  type: 'tool/result',
  data: { turn, step, callId, resultId: `r_${callId}`, status, content: `${callId} done` },
});

/** Two turns, multi-call steps, a closed failed step with an unanswered call,
 *  an unclosed plugin bracket, a surface/replace and input queued mid-turn. */
export const REFERENCE_LOG: NewEvent[] = [
  /* 0 */ { type: 'session/title', data: { title: 'reference' } },
  /* 1 */ { type: 'session/model', data: { provider: 'scripted', model: 'echo' } },
  /* 2 */ { type: 'inbox/add', data: { inputId: 'in_1', text: 'first question' } },
  /* 3 */ { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
  /* 4 */ { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
  /* 5 */ { type: 'step/start', data: { turn: 1, step: 1 } },
  /* 6 */ { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [call('c1', 'clock'), call('c2', 'note_write')] } },
  /* 7 */ result(1, 1, 'c1'),
  /* 8 */ { type: 'step/end', data: { turn: 1, step: 1, reason: 'failed' } }, // c2 stays unanswered: history
  /* 9 */ { type: 'step/start', data: { turn: 1, step: 2 } },
  /* 10 */ {
    type: 'model/message',
    data: { turn: 1, step: 2, text: 'three calls', toolCalls: [call('c3', 'note_read'), call('c4', 'note_write'), call('c5', 'mystery')] },
  },
  /* 11 */ { type: 'plugin/compaction/start', data: { reason: 'size' } }, // never ended: the plugin's business
  /* 12 */ result(1, 2, 'c4'),
  /* 13 */ { type: 'inbox/add', data: { inputId: 'in_2', text: 'queued while running' } },
  /* 14 */ result(1, 2, 'c3'),
  /* 15 */ result(1, 2, 'c5', 'error'),
  /* 16 */ { type: 'step/end', data: { turn: 1, step: 2, reason: 'completed' } },
  /* 17 */ { type: 'step/start', data: { turn: 1, step: 3 } },
  /* 18 */ { type: 'model/message', data: { turn: 1, step: 3, text: 'first answer', toolCalls: [] } },
  /* 19 */ { type: 'step/end', data: { turn: 1, step: 3, reason: 'completed' } },
  /* 20 */ { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  /* 21 */ { type: 'surface/replace', data: { fromSeq: 2, toSeq: 20, content: 'summary of turn 1' } },
  /* 22 */ { type: 'inbox/remove', data: { inputId: 'in_2', reason: 'taken' } },
  /* 23 */ { type: 'turn/start', data: { turn: 2, inputId: 'in_2' } },
  /* 24 */ { type: 'step/start', data: { turn: 2, step: 1 } },
  /* 25 */ { type: 'model/message', data: { turn: 2, step: 1, text: '', toolCalls: [call('c6', 'clock'), call('c7', 'note_write')] } },
  /* 26 */ result(2, 1, 'c7'),
  /* 27 */ { type: 'step/end', data: { turn: 2, step: 1, reason: 'failed' } }, // c6 stays unanswered: a step that completed answers every call
  /* 28 */ { type: 'step/start', data: { turn: 2, step: 2 } },
  /* 29 */ { type: 'model/message', data: { turn: 2, step: 2, text: 'second answer', toolCalls: [] } },
  /* 30 */ { type: 'step/end', data: { turn: 2, step: 2, reason: 'completed' } },
  /* 31 */ { type: 'turn/end', data: { turn: 2, reason: 'completed' } },
];

/** Closers by cut, in order: `r:<callId>` a synthetic result, `step:<turn>/<step>`, `turn:<turn>`. */
export const EXPECTED_CLOSERS: string[][] = [
  /* 0-3: nothing open */ [],
  [],
  [],
  [],
  /* 4 */ ['turn:1'],
  /* 5 */ ['step:1/1', 'turn:1'],
  /* 6 */ ['r:c1', 'r:c2', 'step:1/1', 'turn:1'],
  /* 7 */ ['r:c2', 'step:1/1', 'turn:1'],
  /* 8: the failed step is closed; c2 is not repaired */ ['turn:1'],
  /* 9 */ ['step:1/2', 'turn:1'],
  /* 10 */ ['r:c3', 'r:c4', 'r:c5', 'step:1/2', 'turn:1'],
  /* 11: the plugin bracket gets no end */ ['r:c3', 'r:c4', 'r:c5', 'step:1/2', 'turn:1'],
  /* 12 */ ['r:c3', 'r:c5', 'step:1/2', 'turn:1'],
  /* 13 */ ['r:c3', 'r:c5', 'step:1/2', 'turn:1'],
  /* 14 */ ['r:c5', 'step:1/2', 'turn:1'],
  /* 15 */ ['step:1/2', 'turn:1'],
  /* 16 */ ['turn:1'],
  /* 17 */ ['step:1/3', 'turn:1'],
  /* 18 */ ['step:1/3', 'turn:1'],
  /* 19 */ ['turn:1'],
  /* 20-22 */ [],
  [],
  [],
  /* 23 */ ['turn:2'],
  /* 24 */ ['step:2/1', 'turn:2'],
  /* 25 */ ['r:c6', 'r:c7', 'step:2/1', 'turn:2'],
  /* 26 */ ['r:c6', 'step:2/1', 'turn:2'],
  /* 27 */ ['turn:2'],
  /* 28 */ ['step:2/2', 'turn:2'],
  /* 29 */ ['step:2/2', 'turn:2'],
  /* 30 */ ['turn:2'],
  /* 31 */ [],
];

/** A log with no turn/end (an answered input, no turn yet): a branch of it holds only the marker. */
export const NO_TURN_END_LOG: NewEvent[] = REFERENCE_LOG.slice(0, 4);

/** A turn-level branch (docs/contract.md#branch): the anchor given, the cut it selects, the closers the child gets. */
export interface BranchRow {
  log: 'reference' | 'no turn/end';
  /** Omitted (undefined) and null both mean "no anchor". */
  anchorSeq?: number | null;
  cutSeq: number;
  closers: string[];
}

/**
 * REFERENCE_LOG's turn/ends are at 20 and 31. A branch cuts at a turn/end, so
 * nothing is ever open and the closers are always empty: a row with closers
 * would mean the selection stopped mid-turn.
 */
export const BRANCH_ROWS: BranchRow[] = [
  { log: 'reference', anchorSeq: undefined, cutSeq: 31, closers: [] }, // no anchor: the last turn/end
  { log: 'reference', anchorSeq: null, cutSeq: 31, closers: [] },
  // The 20-cut keeps in_2 (queued at 13, taken at 22) pending: ordinary replay semantics (docs/contract.md#branch).
  { log: 'reference', anchorSeq: 0, cutSeq: 20, closers: [] }, // first turn/end at or after the anchor
  { log: 'reference', anchorSeq: 4, cutSeq: 20, closers: [] },
  { log: 'reference', anchorSeq: 20, cutSeq: 20, closers: [] }, // the turn/end itself
  { log: 'reference', anchorSeq: 21, cutSeq: 31, closers: [] }, // between turns: the next turn/end
  { log: 'reference', anchorSeq: 31, cutSeq: 31, closers: [] },
  { log: 'reference', anchorSeq: 500, cutSeq: 31, closers: [] }, // past the end: the last turn/end
  { log: 'no turn/end', anchorSeq: undefined, cutSeq: -1, closers: [] }, // marker only
  { log: 'no turn/end', anchorSeq: 3, cutSeq: -1, closers: [] },
];

/** Compact name of a closer, as used in EXPECTED_CLOSERS. */
export function closerName(e: { type: string; data: any }): string {
  if (e.type === 'tool/result') return `r:${e.data.callId}`;
  if (e.type === 'step/end') return `step:${e.data.turn}/${e.data.step}`;
  if (e.type === 'turn/end') return `turn:${e.data.turn}`;
  return e.type;
}

export const withSeqs = (events: NewEvent[]): LogEvent[] => events.map((e, seq) => ({ ...e, seq }));

/** What the store reads for a cut: from the last turn/start at or before it. */
export function openTailOf(log: LogEvent[], cut: number): LogEvent[] {
  let start = -1;
  for (let i = 0; i <= cut; i++) if (log[i].type === 'turn/start') start = i;
  return start < 0 ? [] : log.slice(start, cut + 1);
}

/** What is open at a cut, as the store folds it for a fork's seed (openTailOf's events, folded). */
export const openAtCut = (log: LogEvent[], cut: number): OpenTail | undefined => foldLog(openTailOf(log, cut)).openTail();

// ---- Forks and compaction (docs/contract.md#exact-fork, docs/contract.md#branch) ----

const compaction = (through: number, summarySeq: number, content: string): NewEvent[] => [
  { type: 'plugin/compaction/start', data: { reason: 'manual', fromSeq: 0, toSeq: through } },
  { type: 'surface/replace', data: { fromSeq: 0, toSeq: through, content } },
  { type: 'plugin/compaction/end', data: { fromSeq: 0, toSeq: through, summarySeq, reason: 'manual', requests: 1 } },
];
const turn = (n: number, inputId: string, text: string, answer: string): NewEvent[] => textTurn(n, text, answer, inputId);

/** Two turns, each followed by a completed manual compaction (the second after the last turn/end). */
export const COMPACTION_LOG: NewEvent[] = [
  /* 0 */ { type: 'session/model', data: { provider: 'scripted', model: 'scripted' } },
  /* 1-7 */ ...turn(1, 'in_1', 'first question', 'first answer'),
  /* 8-10 */ ...compaction(7, 9, 'summary of turn 1'),
  /* 11-17 */ ...turn(2, 'in_2', 'second question', 'second answer'),
  /* 18-20 */ ...compaction(17, 19, 'summary of turns 1-2'),
];

const summary = (through: number, content: string) => ({ role: 'system', content: `Summary of earlier conversation (events 0..${through}):\n${content}` });
const FIRST_TURN = [
  { role: 'user', content: 'first question' },
  { role: 'assistant', content: 'first answer' },
];
const SECOND_TURN = [
  { role: 'user', content: 'second question' },
  { role: 'assistant', content: 'second answer' },
];

/** A fork of COMPACTION_LOG, and the messages the child's agent would send its model next (before its own input). */
export interface CompactionRow {
  name: string;
  cut: { atSeq: number } | { anchorSeq?: number | null };
  cutSeq: number;
  /** Forked again from the child, at the child's end (nested forks). */
  nested?: boolean;
  request: Array<{ role: string; content: string | null }>;
}

export const COMPACTION_ROWS: CompactionRow[] = [
  { name: 'before any compaction: the whole first turn', cut: { atSeq: 7 }, cutSeq: 7, request: FIRST_TURN },
  { name: 'inside a compaction, after its start: nothing of it', cut: { atSeq: 8 }, cutSeq: 8, request: FIRST_TURN },
  {
    name: 'inside a compaction, after its replacement, before its end: the unfinished compaction is ignored',
    cut: { atSeq: 9 },
    cutSeq: 9,
    request: FIRST_TURN,
  },
  { name: 'after a completed compaction: its summary', cut: { atSeq: 10 }, cutSeq: 10, request: [summary(7, 'summary of turn 1')] },
  { name: 'inside the second compaction: the first one holds', cut: { atSeq: 19 }, cutSeq: 19, request: [summary(7, 'summary of turn 1'), ...SECOND_TURN] },
  { name: 'a branch without anchor keeps the completed standalone compaction', cut: {}, cutSeq: 20, request: [summary(17, 'summary of turns 1-2')] },
  {
    name: 'a branch anchored in the last turn cuts at its turn/end',
    cut: { anchorSeq: 12 },
    cutSeq: 17,
    request: [summary(7, 'summary of turn 1'), ...SECOND_TURN],
  },
  { name: "nested forks keep their ancestors' replacements", cut: { atSeq: 20 }, cutSeq: 20, nested: true, request: [summary(17, 'summary of turns 1-2')] },
  {
    name: 'a nested fork inside the compaction its parent inherited unfinished still ignores it',
    cut: { atSeq: 9 },
    cutSeq: 9,
    nested: true,
    request: FIRST_TURN,
  },
];
