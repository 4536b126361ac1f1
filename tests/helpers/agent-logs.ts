// Logs forkline's own agent loop could write (docs/contract.md#agent-loop), as a fast-check arbitrary:
// inputs queued and taken, turns of steps whose model answers call tools (ids reused across steps, as
// providers number them), approvals asked and decided, workspace writes and retries, turns that
// complete, fail, are cancelled, hit the time limit, crash and are repaired, and a last turn left open
// (a crash not yet repaired) or waiting for a decision; compactions between turns, ended or not; and
// forks of such logs cut at any seq, then continued. Texts hold what the agent stores of hostile text
// (lone surrogates and NULs made U+FFFD, pairs, RTL marks, deep JSON arguments). Built with the agent's
// own closers (core/repair.ts, core/time-limit.ts), so a log here is one the agent writes. Pure.
import fc from 'fast-check';
import type { LogEvent, NewEvent } from '../../src/core/events.ts';
import { foldLog } from '../../src/core/log-state.ts';
import { closersFor } from '../../src/core/repair.ts';
import { buildForkSeed } from '../../src/core/fork-seed.ts';
import { timeLimitClosers } from '../../src/core/time-limit.ts';
import { toStorableText } from '../../src/core/storable.ts';
import { boundedId } from '../../src/core/derived-ids.ts';

export interface AgentEvent extends LogEvent {
  synthetic?: boolean;
  inherited?: boolean;
}

type CallOutcome = 'ok' | 'error' | 'write' | 'denied' | 'approved';
interface CallSpec {
  id: number;
  tool: number;
  args: number;
  outcome: CallOutcome;
}
interface StepSpec {
  text: number;
  calls: CallSpec[];
  retry: boolean;
}
type TurnEnd = 'completed' | 'model-failed' | 'cancelled' | 'time-limit' | 'crash' | 'agent-failed' | 'schema-mismatch';
interface TurnSpec {
  input: number;
  /** Another input queued while this turn runs (taken by the next turn, or left pending). */
  queueNext: boolean;
  steps: StepSpec[];
  end: TurnEnd;
  /** Where, in the last step, a cancel, the time limit, a crash or a failure stops it: after this many of its calls. */
  stopAfter: number;
  /** A setting changed before the turn (title, model, tools, instructions, approval set). */
  setting: number;
  /** A compaction after the turn: none, ended, or never ended. */
  compaction: 'none' | 'ended' | 'unended';
}
export interface AgentLogSpec {
  turns: TurnSpec[];
  /** How the last turn is left: closed as its spec says, open (a crash not yet repaired), or waiting for a decision. */
  tail: 'closed' | 'open' | 'waiting';
  /** Where the open tail stops: after this many events of the last turn. */
  tailAt: number;
  /** A fork of the log, cut at this seq (modulo its length), continued with one more turn (undefined: no fork). */
  fork?: { at: number; turn: TurnSpec };
}

/** Texts the agent stores: made storable as it makes them (a model's answer, a tool's output). */
export const TEXTS = [
  '',
  'hello',
  'ok',
  '\ud83d\ude00 pair kept',
  toStorableText('lone \ud800 surrogate'),
  toStorableText('nul \u0000 inside'),
  '\u202eRTL override',
  'line\r\nbreaks\ttabs',
  '"quotes" and \\backslashes\\',
  'x'.repeat(2000),
  '</script><script>alert(1)</script>',
  'Ω≈ç√∫˜µ≤≥÷',
];
const deepArgs = (depth: number) => `${'['.repeat(depth)}1${']'.repeat(depth)}`;
const ARGS = ['{}', '{"key":"a","value":"v"}', '{"path":"a.txt"}', deepArgs(60), JSON.stringify({ s: TEXTS[4] }), '{"n":1e308}', 'not json'];
/** Tools with their effects, as the agent records them with each call. */
const TOOLS = [
  { name: 'clock', effect: 'read-only' },
  { name: 'note_write', effect: 'idempotent' },
  { name: 'note_read', effect: 'read-only' },
  { name: 'shell', effect: 'side-effects' },
  { name: 'write_file', effect: 'side-effects', files: 'only' },
  { name: 'mcp__thing', effect: undefined },
] as const;
/** Call ids as providers write them: numbered per answer, so reused across steps. */
const CALL_IDS = ['call_0', 'call_1', 'call_2', 'toolu_01A', 'call:with:colons', 'c'.repeat(200)];

const callArb: fc.Arbitrary<CallSpec> = fc.record({
  id: fc.nat(),
  tool: fc.nat(),
  args: fc.nat(),
  outcome: fc.constantFrom<CallOutcome>('ok', 'ok', 'error', 'write', 'denied', 'approved'),
});
const stepArb: fc.Arbitrary<StepSpec> = fc.record({ text: fc.nat(), calls: fc.array(callArb, { maxLength: 3 }), retry: fc.boolean() });
const turnArb: fc.Arbitrary<TurnSpec> = fc.record({
  input: fc.nat(),
  queueNext: fc.boolean(),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 3 }),
  end: fc.constantFrom<TurnEnd>('completed', 'completed', 'completed', 'model-failed', 'cancelled', 'time-limit', 'crash', 'agent-failed', 'schema-mismatch'),
  stopAfter: fc.nat({ max: 3 }),
  setting: fc.nat({ max: 9 }),
  compaction: fc.constantFrom<TurnSpec['compaction']>('none', 'none', 'ended', 'unended'),
});
export const agentLogSpecArb: fc.Arbitrary<AgentLogSpec> = fc.record({
  turns: fc.array(turnArb, { minLength: 1, maxLength: 4 }),
  tail: fc.constantFrom<AgentLogSpec['tail']>('closed', 'closed', 'open', 'waiting'),
  tailAt: fc.nat(),
  fork: fc.option(fc.record({ at: fc.nat(), turn: turnArb }), { nil: undefined }),
});

const at = <T>(xs: readonly T[], n: number): T => xs[n % xs.length];
const effectOf = (name: string) => TOOLS.find((t) => t.name === name)?.effect;

/** Writes a log as the agent does: events appended with their seqs, the fold kept alongside. */
class Writer {
  events: AgentEvent[] = [];
  private inputs = 0;
  private pending: string[] = [];
  constructor(
    private readonly sessionId: string,
    start: AgentEvent[] = [],
  ) {
    this.events = start;
    this.pending = foldLog(start).pendingInputs.map((p) => p.inputId);
    this.inputs = start.length;
  }

  push(...events: NewEvent[]) {
    for (const e of events) this.events.push({ seq: this.events.length, type: e.type, data: e.data, ...(e.synthetic ? { synthetic: true } : {}) });
  }

  queue(text: number) {
    const inputId = `in_${this.sessionId}_${++this.inputs}`;
    this.push({ type: 'inbox/add', data: { inputId, text: at(TEXTS, text) } });
    this.pending.push(inputId);
  }

  setting(n: number) {
    const settings: NewEvent[] = [
      { type: 'session/title', data: { title: at(TEXTS, n).slice(0, 500) } },
      { type: 'session/model', data: { provider: 'scripted', model: 'scripted-1', contextTokens: 128000 } },
      { type: 'session/tools', data: { tools: ['clock', 'note_write', 'note_read', 'shell', 'write_file', 'mcp__*'] } },
      { type: 'session/instructions', data: { text: at(TEXTS, n + 1) } },
      { type: 'session/tool-approval', data: { tools: ['shell'] } },
    ];
    if (n < settings.length) this.push(settings[n]);
  }

  /** One turn as the agent runs it; `stop`: leave it where the spec stops (open tail), else close it as it ends. */
  turn(t: TurnSpec, tail: 'closed' | 'open' | 'waiting', tailAt: number) {
    this.setting(t.setting);
    if (this.pending.length === 0) this.queue(t.input);
    const inputId = this.pending.shift()!;
    const turn = foldLog(this.events).lastTurn + 1;
    const started = this.events.length;
    this.push({ type: 'inbox/remove', data: { inputId, reason: 'taken' } }, { type: 'turn/start', data: { turn, inputId } });
    if (t.queueNext) this.queue(t.input + 1);
    const stopsMidway = t.end !== 'completed' && t.end !== 'model-failed' && t.end !== 'schema-mismatch';
    const lastStep = t.steps.length;
    let waiting = false;
    for (const [k, s] of t.steps.entries()) {
      const step = k + 1;
      const isLast = step === lastStep;
      this.push({ type: 'step/start', data: { turn, step } });
      if (s.retry) this.push({ type: 'plugin/agent/retry', data: { turn, step, attempt: 1, status: 429, error: 'rate limited', delayMs: 10 } });
      if (isLast && (t.end === 'model-failed' || t.end === 'schema-mismatch')) {
        if (t.end === 'model-failed') {
          this.push(
            { type: 'model/message', data: { turn, step, text: at(TEXTS, s.text), toolCalls: [] } },
            { type: 'plugin/agent/error', data: { turn, step, message: 'model failed: 500' } },
          );
        } else {
          this.push(
            { type: 'model/message', data: { turn, step, text: 'not json', toolCalls: [] } },
            { type: 'plugin/agent/error', data: { turn, step, message: 'the answer is not JSON', code: 'OUTPUT_SCHEMA_MISMATCH' } },
          );
        }
        this.push({ type: 'step/end', data: { turn, step, reason: 'failed' } }, { type: 'turn/end', data: { turn, reason: 'failed' } });
        return;
      }
      // Ids unique within the step (the agent refuses a repeat: core/model-calls.ts), reused across steps.
      const ids = new Set<string>();
      const calls = s.calls.flatMap((c) => {
        let id = at(CALL_IDS, c.id);
        for (let n = 2; ids.has(id); n++) id = `${at(CALL_IDS, c.id).slice(0, 190)}_${n}`;
        ids.add(id);
        const tool = at(TOOLS, c.tool);
        return [
          {
            spec: c,
            call: {
              id,
              name: tool.name,
              arguments: at(ARGS, c.args),
              ...(tool.effect ? { effect: tool.effect } : {}),
              ...('files' in tool ? { files: tool.files } : {}),
            },
          },
        ];
      });
      // The last step of a completed turn answers without calls: the turn ends after it.
      const lastAnswer = isLast && !stopsMidway;
      this.push({
        type: 'model/message',
        data: { turn, step, text: at(TEXTS, s.text), toolCalls: lastAnswer ? [] : calls.map((c) => c.call), usage: { inputTokens: 10 + k, outputTokens: 3 } },
      });
      if (lastAnswer) {
        this.push({ type: 'step/end', data: { turn, step, reason: 'completed' } }, { type: 'turn/end', data: { turn, reason: 'completed' } });
        return;
      }
      const stopAt = isLast ? Math.min(t.stopAfter, calls.length) : calls.length;
      for (const [i, { spec, call }] of calls.entries()) {
        if (i >= stopAt) break;
        const needsApproval = spec.outcome === 'denied' || spec.outcome === 'approved';
        if (needsApproval) {
          this.push({ type: 'tool/approval-request', data: { turn, step, callId: call.id } });
          if (tail === 'waiting' && isLast) {
            waiting = true;
            break;
          }
          this.push({ type: 'tool/approval', data: { callId: call.id, decision: spec.outcome, reason: spec.outcome === 'denied' ? 'no' : '', by: 'tok_1' } });
          if (spec.outcome === 'approved') this.push({ type: 'plugin/agent/approved-call-start', data: { turn, step, callId: call.id } });
        }
        if (spec.outcome === 'write') this.push({ type: 'plugin/workspace/write', data: { callId: call.id, key: 'k', value: at(TEXTS, spec.args) } });
        const status = spec.outcome === 'error' || spec.outcome === 'denied' ? 'error' : 'ok';
        this.push({
          type: 'tool/result',
          data: {
            turn,
            step,
            callId: call.id,
            resultId: boundedId(`res_${this.sessionId}_${call.id}`),
            status,
            content: at(TEXTS, spec.args + i),
            name: call.name,
          },
        });
      }
      if (waiting) break;
      if (!isLast) this.push({ type: 'step/end', data: { turn, step, reason: 'completed' } });
    }
    // The last step stopped midway (or waits): the turn is left as a cancel, the limit, a crash or a failure leaves it.
    if (waiting) return;
    if (tail === 'open') {
      this.events.splice(Math.max(started + 2, this.events.length - (tailAt % 4)));
      return;
    }
    const open = foldLog(this.events).openTail();
    if (!open) return;
    const state = foldLog(this.events);
    switch (t.end) {
      case 'cancelled':
        this.push(...(open.step ? [{ type: 'step/end', data: { turn, step: open.step.step, reason: 'interrupted' } }] : []), {
          type: 'turn/end',
          data: { turn, reason: 'cancelled' },
        });
        break;
      case 'time-limit':
        this.push(...timeLimitClosers(open, state.lastStep, 'the turn ran longer than its limit of 1000 ms and was stopped'));
        break;
      case 'agent-failed':
        this.push(...closersFor(open, { kind: 'failed', sessionId: this.sessionId, message: 'bug' }, effectOf));
        break;
      default:
        this.push(...closersFor(open, { kind: 'interrupted', sessionId: this.sessionId }, effectOf));
    }
  }

  compaction(kind: TurnSpec['compaction']) {
    if (kind === 'none') return;
    const toSeq = this.events.length - 1;
    const range = { fromSeq: 0, toSeq };
    this.push({ type: 'plugin/compaction/start', data: { reason: 'manual', ...range } });
    const summarySeq = this.events.length;
    this.push({ type: 'surface/replace', data: { ...range, content: 'summary of it all' } });
    if (kind === 'ended') this.push({ type: 'plugin/compaction/end', data: { ...range, summarySeq } });
  }
}

/** The events of a log the spec describes (seqs from 0); with a fork, the child's log (its prefix inherited). */
export function agentLog(spec: AgentLogSpec, sessionId = 'ses_p'): AgentEvent[] {
  const w = new Writer(sessionId);
  for (const [k, t] of spec.turns.entries()) {
    const last = k === spec.turns.length - 1;
    w.turn(t, last ? spec.tail : 'closed', spec.tailAt);
    if (!last) w.compaction(t.compaction);
  }
  if (!spec.fork) return w.events;
  const parent = w.events;
  const cutSeq = spec.fork.at % parent.length;
  const prefix = parent.slice(0, cutSeq + 1);
  const seed = buildForkSeed({ parentSessionId: sessionId, cutSeq, openTail: foldLog(prefix).openTail(), effectOf });
  const child = new Writer('ses_c', [
    ...prefix.map((e) => ({ ...e, inherited: true })),
    ...seed.events.map((e) => ({ seq: e.seq, type: e.type, data: e.data, ...(e.synthetic ? { synthetic: true } : {}) })),
  ]);
  child.turn(spec.fork.turn, 'closed', 0);
  return child.events;
}

export const agentLogArb: fc.Arbitrary<AgentEvent[]> = agentLogSpecArb.map((s) => agentLog(s));
export { effectOf as agentToolEffect };

const rec = (v: unknown): Record<string, unknown> => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : {});

/**
 * What a log holds that forkline's own agent loop never writes (docs/contract.md#append-rules,
 * docs/contract.md#repair), or nothing: a result before its call or outside its call's step, a call id
 * twice in a step, a step or turn closed twice or never opened, a turn ended with a step still open, and
 * a step ended `completed` with a call of it unanswered (a failure, a cancel, a time limit or a repair
 * leaves calls so). Plugin events are the plugin's.
 */
export function agentWritableProblems(events: ReadonlyArray<Pick<LogEvent, 'seq' | 'type' | 'data'>>): string[] {
  const problems: string[] = [];
  let openTurn: number | undefined;
  let openStep: { step: number; calls: string[]; answered: Set<string> } | undefined;
  const closedTurns = new Set<number>();
  for (const e of events) {
    const d = rec(e.data);
    const where = `seq ${e.seq} (${e.type})`;
    switch (e.type) {
      case 'turn/start':
        if (openTurn !== undefined) problems.push(`${where}: turn ${String(d.turn)} starts inside turn ${openTurn}`);
        openTurn = d.turn as number;
        openStep = undefined;
        break;
      case 'turn/end':
        if (openTurn !== d.turn || closedTurns.has(d.turn as number)) problems.push(`${where}: turn ${String(d.turn)} is not open`);
        if (openStep) problems.push(`${where}: turn ${String(d.turn)} ends with its step ${openStep.step} still open`);
        closedTurns.add(d.turn as number);
        openTurn = undefined;
        openStep = undefined;
        break;
      case 'step/start':
        if (openStep || openTurn !== d.turn) problems.push(`${where}: step ${String(d.step)} starts outside the open turn or inside a step`);
        openStep = { step: d.step as number, calls: [], answered: new Set() };
        break;
      case 'step/end': {
        if (!openStep || openStep.step !== d.step || openTurn !== d.turn) {
          problems.push(`${where}: step ${String(d.step)} is not open`);
          break;
        }
        const unanswered = openStep.calls.filter((c) => !openStep!.answered.has(c));
        if (d.reason === 'completed' && unanswered.length)
          problems.push(`${where}: step ${openStep.step} ends ${String(d.reason)} with call ${unanswered[0]} unanswered`);
        openStep = undefined;
        break;
      }
      case 'model/message':
        if (!openStep || openStep.step !== d.step || openTurn !== d.turn) {
          problems.push(`${where}: an answer outside its step`);
          break;
        }
        for (const c of (d.toolCalls as Array<{ id: string }>) ?? []) {
          if (openStep.calls.includes(c.id)) problems.push(`${where}: call id ${c.id} twice in step ${openStep.step}`);
          openStep.calls.push(c.id);
        }
        break;
      case 'tool/result':
        if (!openStep || openStep.step !== d.step || openTurn !== d.turn || !openStep.calls.includes(d.callId as string))
          problems.push(`${where}: result for call ${String(d.callId)} before its call, or outside its step`);
        else if (openStep.answered.has(d.callId as string)) problems.push(`${where}: call ${String(d.callId)} answered twice`);
        else openStep.answered.add(d.callId as string);
        break;
    }
  }
  return problems;
}
