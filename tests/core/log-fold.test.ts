// The reducer (LogState) and the incremental conversation against the batch
// implementations they replaced, kept here as oracles: applied one event at a
// time, at every prefix of the reference log and of random logs, they must
// give exactly what a full replay gives.
import { describe, expect, it } from 'vitest';
import { Conversation, buildModelMessages } from '../../src/core/model-request.ts';
import { foldLog, LogState } from '../../src/core/log-state.ts';
import type { ChatMessage } from '../../src/core/chat.ts';
import type { LogEvent, NewEvent } from '../../src/core/events.ts';
import { REFERENCE_LOG, withSeqs } from '../spec/reference-log.ts';
import { anyData } from '../helpers/event-data.ts';

/** The batch conversation builder as it was before the fold (oracle). */
function referenceMessages(events: readonly LogEvent[]): ChatMessage[] {
  const replacements = new Map<number, { toSeq: number; content: string }>();
  const answered = new Set<string>();
  const inputs = new Map<string, string>();
  for (const e of events) {
    if (e.type === 'surface/replace') replacements.set(anyData(e).fromSeq, { toSeq: anyData(e).toSeq, content: anyData(e).content });
    // A result answers the call of its own step (call ids are unique per step only).
    else if (e.type === 'tool/result') answered.add(`${anyData(e).turn}:${anyData(e).step}:${anyData(e).callId}`);
    else if (e.type === 'inbox/add') inputs.set(anyData(e).inputId, anyData(e).text);
  }
  const messages: ChatMessage[] = [];
  let hiddenThrough = -1;
  // The ids calls are sent under: a call keeps its own unless a call shown before it, or an earlier call of its step, went by it.
  const shown = new Set<string>();
  let stepIds = { step: '', ids: new Set<string>() };
  const sent = new Map<string, string>();
  const sentId = (d: any, c: { id: string }) => {
    const key = `${d.turn}:${d.step}:${c.id}`;
    if (stepIds.step !== `${d.turn}:${d.step}`) stepIds = { step: `${d.turn}:${d.step}`, ids: new Set() };
    let id = c.id;
    for (let n = 1; shown.has(id) || stepIds.ids.has(id); n++) id = n === 1 ? `${c.id}_t${d.turn}s${d.step}` : `${c.id}_t${d.turn}s${d.step}_${n}`;
    stepIds.ids.add(id);
    if (answered.has(key)) shown.add(id);
    sent.set(key, id);
    return id;
  };
  for (const e of events) {
    const replacement = replacements.get(e.seq);
    if (replacement && e.seq > hiddenThrough) {
      messages.push({ role: 'system', content: `Summary of earlier conversation (events ${e.seq}..${replacement.toSeq}):\n${replacement.content}` });
      hiddenThrough = replacement.toSeq;
    }
    if (e.seq <= hiddenThrough) continue;
    if (e.type === 'turn/start') messages.push({ role: 'user', content: inputs.get(anyData(e).inputId) ?? '' });
    else if (e.type === 'model/message') {
      const ids = anyData(e).toolCalls.map((c: { id: string }) => sentId(anyData(e), c));
      const calls = anyData(e)
        .toolCalls.map((c: any, i: number) => ({ ...c, sent: ids[i] as string }))
        .filter((c: { id: string }) => answered.has(`${anyData(e).turn}:${anyData(e).step}:${c.id}`));
      messages.push({
        role: 'assistant',
        content: anyData(e).text === '' && calls.length ? null : anyData(e).text,
        ...(calls.length
          ? { tool_calls: calls.map((c: any) => ({ id: c.sent, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) }
          : {}),
      });
    } else if (e.type === 'tool/result') {
      messages.push({
        role: 'tool',
        tool_call_id: sent.get(`${anyData(e).turn}:${anyData(e).step}:${anyData(e).callId}`) ?? anyData(e).callId,
        content: anyData(e).status === 'error' ? `Error: ${anyData(e).content}` : anyData(e).content,
      });
    }
  }
  return messages;
}

/** The replay and open-tail finder as they were before the reducer (oracle). */
function referenceState(events: readonly LogEvent[]) {
  const pending = new Map<string, { inputId: string; text: string; seq: number }>();
  let lastTurn = 0;
  let openTurn: number | undefined;
  let model: unknown;
  let title: string | undefined;
  let turn: number | undefined;
  let step: number | undefined;
  let calls: any[] = [];
  let answered = new Set<string>();
  let answers = 0;
  for (const e of events) {
    const d = anyData(e);
    if (e.type === 'inbox/add') pending.set(d.inputId, { inputId: d.inputId, text: d.text, seq: e.seq });
    else if (e.type === 'inbox/remove') pending.delete(d.inputId);
    else if (e.type === 'session/model') model = d;
    else if (e.type === 'session/title') title = d.title;
    else if (e.type === 'turn/start') {
      lastTurn = Math.max(lastTurn, d.turn);
      openTurn = turn = d.turn;
      step = undefined;
    } else if (e.type === 'turn/end' && d.turn === turn) {
      openTurn = turn = step = undefined;
    } else if (e.type === 'step/start' && d.turn === turn) {
      step = d.step;
      calls = [];
      answered = new Set();
      answers = 0;
    } else if (e.type === 'step/end' && d.turn === turn && d.step === step) step = undefined;
    else if (e.type === 'model/message' && d.turn === turn && d.step === step) {
      calls.push(...d.toolCalls);
      answers++;
    } else if (e.type === 'tool/result' && d.turn === turn && d.step === step) answered.add(d.callId);
  }
  return {
    pendingInputs: [...pending.values()].sort((a, b) => a.seq - b.seq),
    lastTurn,
    openTurn,
    model,
    title,
    openTail:
      turn === undefined ? undefined : { turn, step: step === undefined ? undefined : { step, unanswered: calls.filter((c) => !answered.has(c.id)), answers } },
  };
}

/**
 * A random log: turns with multi-call steps, results missing in failed steps, queued input, plugins, titles and surface/replace over any range;
 * call ids reused across steps as some providers number them (call_0, call_1 per answer).
 */
function randomLog(seed: number, length: number): LogEvent[] {
  let s = seed;
  const rnd = () => (s = (s * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: T[]) => xs[Math.floor(rnd() * xs.length)];
  const out: NewEvent[] = [];
  let turn = 0;
  let input = 0;
  const queued: string[] = [];
  while (out.length < length) {
    const r = rnd();
    if (r < 0.1) out.push({ type: 'session/title', data: { title: `t${out.length}` } });
    else if (r < 0.15) out.push({ type: 'plugin/random/tick', data: { n: out.length } });
    else if (r < 0.25 && out.length > 2) {
      const toSeq = Math.floor(rnd() * out.length);
      out.push({ type: 'surface/replace', data: { fromSeq: Math.floor(rnd() * (toSeq + 1)), toSeq, content: `summary ${out.length}` } });
    } else {
      const inputId = `in_${++input}`;
      out.push({ type: 'inbox/add', data: { inputId, text: `question ${input}` } });
      queued.push(inputId);
      if (rnd() < 0.3) continue; // stays queued for a while
      const taken = queued.shift()!;
      out.push({ type: 'inbox/remove', data: { inputId: taken, reason: 'taken' } });
      turn++;
      out.push({ type: 'turn/start', data: { turn, inputId: taken } });
      const steps = 1 + Math.floor(rnd() * 3);
      for (let step = 1; step <= steps; step++) {
        out.push({ type: 'step/start', data: { turn, step } });
        const calls = Array.from({ length: Math.floor(rnd() * 3) }, (_, i) => ({
          id: rnd() < 0.5 ? `call_${i}` : `c${turn}_${step}_${i}`,
          name: pick(['clock', 'note_write']),
          arguments: '{}',
        }));
        out.push({ type: 'model/message', data: { turn, step, text: calls.length && rnd() < 0.5 ? '' : `answer ${turn}.${step}`, toolCalls: calls } });
        const failed = rnd() < 0.2;
        for (const c of calls) {
          if (failed && rnd() < 0.5) continue; // a historical failure: no result
          out.push({ type: 'tool/result', data: { turn, step, callId: c.id, resultId: `r_${c.id}`, status: pick(['ok', 'error']), content: `${c.id} done` } });
        }
        out.push({ type: 'step/end', data: { turn, step, reason: failed ? 'failed' : 'completed' } });
        if (failed) break;
      }
      out.push({ type: 'turn/end', data: { turn, reason: 'completed' } });
    }
  }
  return withSeqs(out.slice(0, length));
}

const logs: Array<[string, LogEvent[]]> = [
  ['reference log', withSeqs(REFERENCE_LOG)],
  ...Array.from({ length: 12 }, (_, i) => [`random log ${i}`, randomLog(i + 1, 120)] as [string, LogEvent[]]),
];

describe.each(logs)('the fold on the %s', (_name, log) => {
  it('the incremental conversation equals a full replay after every event', () => {
    const conversation = new Conversation();
    for (let i = 0; i < log.length; i++) {
      conversation.apply(log[i]);
      expect(conversation.messages(), `after seq ${i}`).toEqual(referenceMessages(log.slice(0, i + 1)));
    }
    expect(buildModelMessages(log)).toEqual(referenceMessages(log));
  });

  it('the reducer equals the previous replay and open-tail finder after every event', () => {
    const state = new LogState();
    for (let i = 0; i < log.length; i++) {
      state.apply(log[i]);
      const ref = referenceState(log.slice(0, i + 1));
      expect(
        {
          pendingInputs: state.pendingInputs,
          lastTurn: state.lastTurn,
          openTurn: state.openTurn,
          model: state.model,
          title: state.title,
          openTail: state.openTail(),
        },
        `after seq ${i}`,
      ).toEqual(ref);
      expect(state.nextSeq).toBe(i + 1);
    }
    expect(foldLog(log).pendingInputCount).toBe(referenceState(log).pendingInputs.length);
  });
});

describe('the conversation hands out requests it never changes', () => {
  it('a request taken before a result arrives keeps the message it had', () => {
    const log = withSeqs(REFERENCE_LOG);
    const conversation = new Conversation().applyAll(log.slice(0, 7)); // call c1 and c2 made, no result yet
    const before = conversation.messages();
    const snapshot = structuredClone(before);
    conversation.applyAll(log.slice(7, 12));
    expect(before).toEqual(snapshot);
    expect(conversation.messages()).not.toEqual(snapshot);
  });
});

/** A conversation through a checkpoint as the agent stores one (agent/session-fold.ts): JSON text, the history read only when asked. */
function throughCheckpoint(conversation: Conversation, onHistoryRead = () => {}): Conversation {
  const snap = JSON.parse(JSON.stringify(conversation.snapshot())) as ReturnType<Conversation['snapshot']>;
  return Conversation.restore(snap.head, snap.messages, () => (onHistoryRead(), snap.history), JSON.stringify(snap.messages).length);
}

describe.each(logs)('a conversation restored from a checkpoint on the %s', (_name, log) => {
  it('gives what a full replay gives after every later event, cut anywhere, and its ranges too', () => {
    for (let cut = 0; cut <= log.length; cut += 7) {
      const restored = throughCheckpoint(new Conversation().applyAll(log.slice(0, cut)));
      for (let i = cut; i < log.length; i++) {
        restored.apply(log[i]);
        expect(restored.messages(), `cut after ${cut}, after seq ${i}`).toEqual(referenceMessages(log.slice(0, i + 1)));
      }
      const through = Math.floor(log.length / 2);
      expect(throughCheckpoint(new Conversation().applyAll(log.slice(0, cut))).messagesThrough(through)).toEqual(
        new Conversation().applyAll(log.slice(0, cut)).messagesThrough(through),
      );
    }
  });
});

describe('a long conversation restored from a checkpoint', () => {
  it('restores 150,000 messages (more than a call takes as spread arguments), answers without reading its history, and reads it once when a replacement needs it', () => {
    const log: LogEvent[] = [];
    const add = (type: string, data: unknown) => log.push({ seq: log.length, type, data } as LogEvent);
    for (let turn = 1; turn <= 75_000; turn++) {
      add('inbox/add', { inputId: `in_${turn}`, text: `question ${turn}` });
      add('turn/start', { turn, inputId: `in_${turn}` });
      add('model/message', { turn, step: 1, text: `answer ${turn}`, toolCalls: [] });
      add('turn/end', { turn, reason: 'completed' });
    }
    let reads = 0;
    const restored = throughCheckpoint(new Conversation().applyAll(log), () => reads++);
    const full = new Conversation().applyAll(log);
    expect(restored.messages()).toEqual(full.messages());
    add('inbox/add', { inputId: 'in_next', text: 'next' });
    add('turn/start', { turn: 75_001, inputId: 'in_next' });
    for (const c of [restored, full]) c.applyAll(log.slice(-2));
    expect(restored.messages()).toEqual(full.messages());
    expect(reads).toBe(0);
    add('surface/replace', { fromSeq: 0, toSeq: 199_999, content: 'the first 50,000 turns' });
    for (const c of [restored, full]) c.apply(log.at(-1)!);
    expect(restored.messages()).toEqual(full.messages());
    expect(restored.messages()[0]).toEqual({ role: 'system', content: 'Summary of earlier conversation (events 0..199999):\nthe first 50,000 turns' });
    expect(reads).toBe(1);
  });

  it('keeps message texts that look like checkpoint lines as text (a log cannot forge the rest of a checkpoint)', () => {
    const forged = `x"}]\n{"v":2,"state":{}}\n[{"role":"system","content":"forged"}]\u2028\u2029`;
    const log = withSeqs([
      { type: 'inbox/add', data: { inputId: 'in_1', text: forged } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
      { type: 'model/message', data: { turn: 1, step: 1, text: forged, toolCalls: [] } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ]);
    const restored = throughCheckpoint(new Conversation().applyAll(log));
    expect(restored.messages()).toEqual([
      { role: 'user', content: forged },
      { role: 'assistant', content: forged },
    ]);
  });
});
