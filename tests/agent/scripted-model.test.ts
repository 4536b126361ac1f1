// The scripted model counts usage and numbers its calls from running totals it
// keeps with the messages (shared objects across a conversation's requests), so
// a step costs what is new, not the conversation. The totals must be exactly
// what counting every message gives, whatever happened to the conversation.
import { describe, expect, it } from 'vitest';
import { ModelRegistry } from '../../src/agent/models/registry.ts';
import { Conversation } from '../../src/core/model-request.ts';
import type { ChatMessage } from '../../src/core/chat.ts';
import type { LogEvent } from '../../src/core/events.ts';

const words = (m: ChatMessage) => (m.content ? (m.content.match(/\S+/g)?.length ?? 0) : 0);
const options = () => ({ signal: new AbortController().signal, onDelta: () => {} });

describe('the scripted model', () => {
  it('reports the words of the whole request and numbers calls by the user messages, across turns, tool calls, replacements and system prompts', async () => {
    // The scripted language model as the agent calls it: through the registry's adapter (prompt.ts converts each message once).
    const registry = new ModelRegistry();
    const model = registry.resolve('scripted');
    const conversation = new Conversation();
    let seq = 0;
    const log = (type: string, data: unknown) => conversation.apply({ seq: seq++, type, data } as LogEvent);
    for (let turn = 1; turn <= 6; turn++) {
      log('inbox/add', { inputId: `in_${turn}`, text: `question number ${turn} with some words\n!call clock` });
      log('turn/start', { turn, inputId: `in_${turn}` });
      for (let step = 1; ; step++) {
        // Turn 4 asks with a system prompt: every index moves by one.
        const messages = conversation.messages(turn === 4 ? { system: 'you are a clock' } : {});
        const answer = await model.complete({ provider: 'scripted', model: 'm', messages, tools: [] }, options());
        expect(answer.usage!.inputTokens, `turn ${turn} step ${step}`).toBe(messages.reduce((n, m) => n + words(m), 0));
        log('model/message', { turn, step, text: answer.text, toolCalls: answer.toolCalls });
        if (answer.toolCalls.length === 0) break;
        // Numbered by the user messages the request holds (a replacement may hide some).
        expect(answer.toolCalls[0].id).toBe(`call_${messages.filter((m) => m.role === 'user').length}_${step}_1`);
        for (const c of answer.toolCalls) log('tool/result', { turn, step, callId: c.id, resultId: `r_${c.id}`, status: 'ok', content: 'it is noon' });
      }
      log('turn/end', { turn, reason: 'completed' });
      // A surface/replace renders the history again (new message objects): the totals still hold.
      if (turn === 3) log('surface/replace', { fromSeq: 0, toSeq: 5, content: 'an earlier exchange, summarized in eight words' });
    }
    expect(registry.scripted.requestCount).toBe(12);
  });
});

describe('the scripted model counts words', () => {
  it('as /\\S+/g does, over every kind of white space', async () => {
    const { words: count } = await import('../../src/agent/models/scripted.ts');
    const spaces = [' ', '\t', '\n', '\v', '\f', '\r', '\u00a0', '\u1680', '\u2000', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\ufeff'];
    const samples = ['', 'one', '  lead and trail  ', 'a\u200bb', 'é ü 日本 語', '\u0085x', ...spaces.map((s) => `a${s}b${s}${s}c`)];
    for (const t of samples) expect(count(t), JSON.stringify(t)).toBe(t.match(/\S+/g)?.length ?? 0);
  });
});
