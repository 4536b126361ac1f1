// What the model's history holds of a huge log (core/held-text.ts): one event's
// text clipped to MAX_HELD_EVENT_CHARS with a note, and the history within
// MAX_HELD_HISTORY_CHARS, its earliest part left out with a note; a fold
// restored from its snapshot goes on exactly as one that never stopped.
import { describe, expect, it } from 'vitest';
import { heldText, MAX_HELD_EVENT_CHARS, MAX_HELD_HISTORY_CHARS } from '../../src/core/held-text.ts';
import { Conversation } from '../../src/core/model-request.ts';
import type { LogEvent } from '../../src/core/events.ts';

describe('heldText', () => {
  it('keeps a text within the bound as it is', () => {
    const t = 'x'.repeat(1000);
    expect(heldText(t, 3, 1000)).toBe(t);
  });

  it('keeps the beginning and the end of a longer one, with a note of what was left out between, within the bound', () => {
    const t = `BEGIN${'a'.repeat(10_000)}${'b'.repeat(10_000)}END`;
    const held = heldText(t, 7, 2000);
    expect(held.length).toBeLessThanOrEqual(2000);
    expect(held.startsWith('BEGINaaa')).toBe(true);
    expect(held.endsWith('bbbEND')).toBe(true);
    const omitted = Number(/\[… (\d+) characters of event 7 left out here: the model's history holds at most 2000 characters of one event …\]/.exec(held)![1]);
    // What is kept at either end and what the note counts make up the text.
    const head = held.indexOf('\n[…');
    const tail = held.length - (held.indexOf('…]\n') + 3);
    expect(head + omitted + tail).toBe(t.length);
    expect(t.slice(0, head) + t.slice(t.length - tail)).toBe(held.slice(0, head) + held.slice(held.length - tail));
    // Clipping what was clipped changes nothing.
    expect(heldText(held, 7, 2000)).toBe(held);
  });

  it('never splits a character made of two UTF-16 units', () => {
    const t = '😀'.repeat(5000);
    const held = heldText(t, 1, 1001);
    expect(held).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/);
  });
});

const ev = (seq: number, type: string, data: unknown): LogEvent => ({ seq, type, data }) as LogEvent;

/** A log of `turns` turns, each a question, a call answered, and an answer of `chars` characters. */
function log(turns: number, chars: number): LogEvent[] {
  const out: LogEvent[] = [];
  let seq = 0;
  for (let t = 1; t <= turns; t++) {
    const inputId = `in_${t}`;
    out.push(ev(seq++, 'inbox/add', { inputId, text: `question ${t}` }));
    out.push(ev(seq++, 'turn/start', { turn: t, inputId }));
    out.push(ev(seq++, 'model/message', { turn: t, step: 1, text: '', toolCalls: [{ id: `c${t}`, name: 'clock', arguments: '{}' }] }));
    out.push(ev(seq++, 'tool/result', { turn: t, step: 1, callId: `c${t}`, resultId: `r${t}`, status: 'ok', content: `result ${t} `.padEnd(chars, 'r') }));
    out.push(ev(seq++, 'model/message', { turn: t, step: 2, text: `answer ${t} `.padEnd(chars, 'a'), toolCalls: [] }));
    out.push(ev(seq++, 'turn/end', { turn: t, reason: 'completed' }));
  }
  return out;
}

describe('a conversation of a history larger than it holds', () => {
  it('clips an event past MAX_HELD_EVENT_CHARS', () => {
    const c = new Conversation().applyAll(log(1, 3 * MAX_HELD_EVENT_CHARS));
    const [, , tool, answer] = c.messages();
    expect(tool.content!.length).toBeLessThanOrEqual(MAX_HELD_EVENT_CHARS);
    expect(answer.content!.length).toBeLessThanOrEqual(MAX_HELD_EVENT_CHARS);
    expect(answer.content).toMatch(/^answer 1 a+\n\[… \d+ characters of event 4 left out here/);
  });

  it('leaves out its earliest turns past MAX_HELD_HISTORY_CHARS, a note standing for them, never a result without its call', () => {
    const chars = 200_000;
    const turns = Math.ceil((2 * MAX_HELD_HISTORY_CHARS) / (2 * chars));
    const c = new Conversation().applyAll(log(turns, chars));
    const messages = c.messages();
    const held = messages.reduce((n, m) => n + (m.content?.length ?? 0), 0);
    expect(held).toBeLessThanOrEqual(MAX_HELD_HISTORY_CHARS + 1000);
    expect(held).toBeGreaterThan(MAX_HELD_HISTORY_CHARS / 2);
    expect(messages[0].role).toBe('system');
    expect(messages[0].content).toMatch(/^\[Earlier conversation \(events 0\.\.\d+: \d+ messages, \d+ characters\) is left out/);
    expect(messages.at(-1)!.content).toMatch(new RegExp(`^answer ${turns} `));
    // Every tool message answers a call of an assistant message before it.
    const calls = new Set<string>();
    for (const m of messages) {
      if (m.role === 'assistant') for (const call of m.tool_calls ?? []) calls.add(call.id);
      if (m.role === 'tool') expect(calls.has(m.tool_call_id)).toBe(true);
    }
  });

  it('restored from a snapshot mid-way, goes on as the fold that never stopped', () => {
    const events = log(Math.ceil(MAX_HELD_HISTORY_CHARS / 200_000) + 10, 100_000);
    const whole = new Conversation().applyAll(events);
    const half = Math.floor(events.length / 2);
    const first = new Conversation().applyAll(events.slice(0, half));
    const snap = JSON.parse(JSON.stringify(first.snapshot()));
    const restored = Conversation.restore(snap.head, snap.messages, () => snap.history, JSON.stringify(snap.messages).length).applyAll(events.slice(half));
    expect(restored.messages()).toEqual(whole.messages());
    expect(restored.messagesThrough(events.length - 1)).toEqual(whole.messagesThrough(events.length - 1));
  });
});
