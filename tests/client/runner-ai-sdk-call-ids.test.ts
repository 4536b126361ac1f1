// The AI SDK adapter (@forkline/ai-sdk) with call ids a model gives inside one
// turn (docs/runners.md#call-ids): the real @ai-sdk/openai (Chat Completions)
// and @ai-sdk/anthropic models against a fake provider that refuses what the
// real API refuses (tests/helpers/provider-rules.ts: a chat call id over 40
// characters, an Anthropic `tool_use.id` outside `^[a-zA-Z0-9_-]+$` or twice
// in a request, a result for no call). The AI SDK hands a turn's calls back to
// the model in its next step under the ids the model gave them, so the old
// code failed the turn on an answer holding one id twice, over 200
// characters or with a NUL (the log refused it), and on the next step's
// request repeating an earlier call's id or sending one the provider refuses
// (a 400). Now each call is recorded as forkline's own agent records it and
// the SDK is handed its wire id (the cases of runner-agents-call-ids.test.ts:
// a repeated id in one answer, an id the log cannot hold, an id providers
// refuse, an id repeating an earlier step's). The app's own view of the turn
// (onStream: the UI message stream useChat reads) shows each call once, under
// the id it ran by; and call arguments holding a NUL or a lone surrogate are
// stored as U+FFFD. Runs on ai 6 here and on ai 7 in ai-sdk-v7.test.ts.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createOpenAI } from '@ai-sdk/openai';
import { readUIMessageStream, tool, type ToolSet, type UIMessage } from 'ai';
import { ForklineRunner } from '@forkline/runner';
import { runAiSdkTurns, type AiSdkModel } from '@forkline/ai-sdk';
import { look, useScriptedProvider, type Call } from '../helpers/call-id-sessions.ts';
import type { Provider } from '../helpers/provider-rules.ts';
import { toStorableText } from '../../src/core/storable.ts';

const { held, session, logOf, messages, results, requestIds, requestsSince } = useScriptedProvider('ai-sdk-call-ids');

const tools: ToolSet = {
  lookup: tool({
    description: 'looks a key up',
    inputSchema: z.object({ key: z.string() }),
    execute: async ({ key }) => (held.ran.push(key), `value of ${key}`),
  }),
};

const modelOf = (provider: Provider): AiSdkModel =>
  provider === 'anthropic'
    ? createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model')
    : createOpenAI({ baseURL: `${held.fake.base}/openai/v1`, apiKey: 'sk' }).chat('fake-model');

/** The app's own view of each turn it serves (onStream): the `ai` UI message stream useChat reads, read to its end. */
let views: Array<Promise<UIMessage | undefined>> = [];
async function lastOf(messages: AsyncIterable<UIMessage>): Promise<UIMessage | undefined> {
  let last: UIMessage | undefined;
  for await (const m of messages) last = m;
  return last;
}

async function serve(s: { id: string; pool: string }, provider: Provider, mode: 'stream' | 'generate') {
  const runner = new ForklineRunner({ url: held.app.url, pool: s.pool });
  try {
    await runner.serve(s.id, (session) =>
      runAiSdkTurns(session, {
        model: modelOf(provider),
        tools,
        mode,
        onStream: (result) => void views.push(lastOf(readUIMessageStream({ stream: result.toUIMessageStream() }))),
      }).then(() => {}),
    );
  } finally {
    await runner.close();
  }
}

/** An id the log holds and the provider refuses: over Chat Completions' 40 characters, outside Anthropic's characters. */
const refusedByWire = (provider: Provider) => (provider === 'anthropic' ? 'toolu 1 ✓' : `call_${'x'.repeat(95)}`);

describe.each([
  ['openai', 'stream'],
  ['anthropic', 'stream'],
  ['anthropic', 'generate'],
] as Array<[Provider, 'stream' | 'generate']>)('%s (%s)', (provider, mode) => {
  it('records a call whose id the log cannot hold (300 characters) under its position, answered with why: it never runs', async () => {
    const s = await session('look up a');
    const from = held.fake.received.length;
    held.script = [[look('t'.repeat(300), 'a')], 'done'];
    held.ran.length = 0;
    await serve(s, provider, mode);

    expect(held.ran).toEqual([]);
    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls).toMatchObject([{ id: 'call_1', name: 'lookup' }]);
    expect(results(log)).toEqual([{ callId: 'call_1', status: 'error', content: 'not run: the model gave it an id of 300 characters (1-200 allowed)' }]);
    expect(requestsSince(from)).toEqual([
      { refusal: undefined, ids: [] },
      { refusal: undefined, ids: ['call_1'] },
    ]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it('records an id the provider refuses as given, runs it, and sends it back under its wire form', async () => {
    const s = await session('look up a');
    const from = held.fake.received.length;
    const id = refusedByWire(provider);
    held.script = [[look(id, 'a')], 'done'];
    held.ran.length = 0;
    await serve(s, provider, mode);

    expect(held.ran).toEqual(['a']);
    const log = await logOf(s.id);
    expect(results(log)).toEqual([{ callId: id, status: 'ok', content: 'value of a' }]);
    const requests = requestsSince(from);
    expect(requests.map((r) => r.refusal)).toEqual([undefined, undefined]);
    const history = await requestIds(s.id);
    expect(requests[1].ids).toEqual(history);
    expect(history[0]).not.toBe(id);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it("runs a call repeating an earlier step's id under a fresh id: no request holds an id twice", async () => {
    const s = await session('look up a, then b');
    const from = held.fake.received.length;
    held.script = [[look('toolu_0', 'a')], [look('toolu_0', 'b')], 'done'];
    held.ran.length = 0;
    await serve(s, provider, mode);

    expect(held.ran).toEqual(['a', 'b']);
    const log = await logOf(s.id);
    expect(messages(log).flatMap((m) => m.toolCalls.map((c: Call) => c.id))).toEqual(['toolu_0', 'call_1']);
    const requests = requestsSince(from);
    expect(requests.map((r) => r.refusal)).toEqual([undefined, undefined, undefined]);
    for (const r of requests) expect(new Set(r.ids).size).toBe(r.ids.length);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});

// @ai-sdk/openai's chat model itself gives a call whose streamed id repeats another's an id of its own: Anthropic's does not.
describe.each(['stream', 'generate'] as const)('anthropic (%s), two calls of one id', (mode) => {
  it('runs the first of two calls an answer gives one id; the second is recorded under its position, answered, never run', async () => {
    const s = await session('look up a and b');
    const from = held.fake.received.length;
    held.script = [[look('toolu_1', 'a'), look('toolu_1', 'b')], 'done'];
    held.ran.length = 0;
    await serve(s, 'anthropic', mode);

    expect(held.ran).toEqual(['a']);
    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls.map((c: Call) => c.id)).toEqual(['toolu_1', 'call_2']);
    expect(results(log)).toEqual([
      { callId: 'call_2', status: 'error', content: 'not run: the model gave it the id of another call of this step (toolu_1)' },
      { callId: 'toolu_1', status: 'ok', content: 'value of a' },
    ]);
    expect(requestsSince(from)).toEqual([
      { refusal: undefined, ids: [] },
      { refusal: undefined, ids: ['toolu_1', 'call_2'] },
    ]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});

// (Streamed only: the fake provider's one JSON message for generateText is made by parsing each call's input.)
describe('anthropic (stream), two calls of one id, the second with arguments that are not JSON', () => {
  it('stores what the SDK hands the model for the second when its arguments are not JSON (its parse error), not the refusal', async () => {
    const s = await session('look up a and b');
    held.script = [[look('toolu_1', 'a'), { id: 'toolu_1', name: 'lookup', arguments: '{"key": "b"' }], 'done'];
    held.ran.length = 0;
    await serve(s, 'anthropic', 'stream');

    expect(held.ran).toEqual(['a']);
    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls.map((c: Call) => c.id)).toEqual(['toolu_1', 'call_2']);
    const sent = held.fake.received.at(-1)!.body.messages.flatMap((m: any) => (Array.isArray(m.content) ? m.content : []));
    const handed = sent.find((p: any) => p.type === 'tool_result' && p.tool_use_id === 'call_2');
    const text = typeof handed.content === 'string' ? handed.content : handed.content.map((p: any) => p.text).join('');
    expect(text).toMatch(/^Error: .*JSON/s);
    // Handed as a request built from the log renders the stored error result (`Error: <content>`).
    expect(results(log).find((r) => r.callId === 'call_2')).toEqual({ callId: 'call_2', status: 'error', content: text.slice('Error: '.length) });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});

// The app reading the turn's stream (useChat's UI message stream): a call RunCallIds renamed streamed its input under
// the model's id and completed under another, so the old code showed a call stuck with its input streaming that never
// completed, and a completed one that never started. Every part of a call now goes by the id the SDK runs it by.
describe.each(['openai', 'anthropic'] as const)('%s (stream), the app reading the turn as useChat does', (provider) => {
  it.each([
    ['an id the log cannot hold', [[look('t'.repeat(300), 'a')], 'done']],
    ["an id repeating an earlier step's", [[look('toolu_0', 'a')], [look('toolu_0', 'b')], 'done']],
    ['an id the provider refuses', [[look(refusedByWire(provider), 'a')], 'done']],
  ] as Array<[string, Array<Call[] | string>]>)(
    'shows each call once, finished, under the id it ran by: %s',
    async (_, answers) => {
      const s = await session('look up');
      held.script = [...answers];
      views = [];
      await serve(s, provider, 'stream');

      expect(views).toHaveLength(1);
      const message = await views[0];
      const calls = message!.parts.filter((p) => p.type.startsWith('tool-')) as Array<{ toolCallId: string; state: string; input: unknown }>;
      const log = await logOf(s.id);
      const logged = messages(log).flatMap((m) => m.toolCalls as Call[]);
      // One part per call, each finished (its output or its error), none left streaming its input.
      expect(calls.map((c) => c.state)).toEqual(logged.map(() => expect.stringMatching(/^output-(available|error)$/)));
      expect(calls.map((c) => c.input)).toEqual(logged.map((c) => JSON.parse(c.arguments)));
      expect(new Set(calls.map((c) => c.toolCallId)).size).toBe(calls.length);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    },
    60_000,
  );
});

// A model's call arguments are outside input: the real @ai-sdk/openai hands on a NUL or a lone surrogate the provider's
// JSON escapes (`\u0000`, `\ud800`) as it is, so the old TurnWriter sent an answer the log refused and the turn failed.
describe('openai (stream), call arguments the log cannot hold as they are', () => {
  it("stores them as forkline's own agent does (U+FFFD) and the turn goes on", async () => {
    const s = await session('look up');
    const args = ['{"key":"a\ud800"}', '{"key":"b\u0000"}'];
    held.script = [
      [
        { id: 'call_a', name: 'lookup', arguments: args[0] },
        { id: 'call_b', name: 'lookup', arguments: args[1] },
      ],
      'done',
    ];
    held.ran.length = 0;
    await serve(s, 'openai', 'stream');

    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls.map((c: Call) => c.arguments)).toEqual(args.map(toStorableText));
    // The lone surrogate's call ran (its input is valid JSON); the NUL's is not JSON, so the SDK answered it with an error.
    expect(held.ran).toEqual(['a\ud800']);
    expect(results(log).map((r) => [r.callId, r.status])).toEqual([
      ['call_a', 'ok'],
      ['call_b', 'error'],
    ]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});
