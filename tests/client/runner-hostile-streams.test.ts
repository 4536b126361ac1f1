// Both runner adapters (@forkline/ai-sdk over `ai`, @forkline/openai-agents
// over @openai/agents) against a provider streaming hostile answers in the
// real wire formats (Chat Completions and Responses SSE, the SDKs' own OpenAI
// models), through the real server (docs/runners.md); runner-hostile-streams-v7
// runs the same on ai 7. After each the log is read, and a fork of it is
// served (its request taken by the provider, its turn completed).
// - A stream that stops in the middle of a call, or after its whole arguments,
//   with no finish: forkline's own agent takes it as a connection lost
//   mid-answer (docs/agents.md#models): none of its calls runs and the turn
//   fails. Before, the adapters took it as whole: the Agents SDK's Chat
//   Completions model ran the call (the tool ran on an answer that never
//   ended, the turn completed), the AI SDK stored the cut call and went on
//   (ai 6: answered with a parse error, turn completed; over Responses an
//   empty answer, turn completed; ai 7: "stopped after 4 steps" after one).
// - Coverage (held before): parallel calls where one tool throws
//   synchronously; text after a call in one answer; a call id of 10 KB with
//   control characters (recorded under its position, never run) and a short
//   one with them (stored and sent as given); 20 MB of arguments in 256-byte
//   deltas (the SDK holds them as it would without forkline; the server
//   refuses the batch over FORKLINE_MAX_BODY_BYTES, no tool runs, the turn
//   fails saying so).
// - Coverage (held before): a call given whole, then the provider's error
//   event, then the stream's end or the answer's end as if whole: the tool
//   runs only where the log answers the call as run (ai 6 over Chat
//   Completions runs it when a finish reason follows the error, as the SDK
//   alone does; the others answer it as not run, or store none, and fail the
//   turn); a tool that throws a string, undefined, or an object whose text
//   forms throw: an `error` result holding what the model read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { tool as aiTool, type ToolSet } from 'ai';
import { Agent, OpenAIProvider, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { refusingProviders, type Provider } from '../helpers/provider-rules.ts';
import { answerOf, runnerSessions, type Call } from '../helpers/call-id-sessions.ts';
import { chatChunk, sse } from '../helpers/provider-sse.ts';

/** What the provider answers each request with: raw SSE events, or a scripted answer (answerOf). */
type Answer = ((provider: Provider) => string[]) | Call[] | string;
const held = { script: [] as Answer[], ran: [] as string[] } as {
  app: TestApp;
  fake: Awaited<ReturnType<typeof refusingProviders>>;
  script: Answer[];
  ran: string[];
};
const { session, send, logOf, messages, results } = runnerSessions(() => held.app, 'hostile-streams');

beforeAll(async () => {
  setTracingDisabled(true);
  held.fake = await refusingProviders((provider) => {
    const a = held.script.shift() ?? 'done';
    return typeof a === 'function' ? a(provider) : answerOf(provider, a);
  });
  held.app = await startTestApp();
}, 60_000);
afterAll(async () => {
  await held.app?.close();
  await held.fake?.close();
});

const parameters = z.object({ key: z.string() });
/** The tests' tools: `lookup` records what it ran; `boom` throws before it returns a promise. */
const execs = {
  lookup: async ({ key }: { key: string }) => (held.ran.push(key), `value of ${key}`),
  boom: ({ key }: { key: string }): Promise<string> => {
    held.ran.push(`boom ${key}`);
    throw new Error(`boom ${key}`);
  },
  /** Throws what is not an Error: a string, undefined, or an object whose every text form throws. */
  odd: async ({ key }: { key: string }): Promise<string> => {
    held.ran.push(`odd ${key}`);
    if (key === 'string') throw 'a thrown string';
    if (key === 'undefined') throw undefined;
    const hostile = {
      toString: () => {
        throw new Error('no text');
      },
      get message(): string {
        throw new Error('no message');
      },
      toJSON: () => {
        throw new Error('no JSON');
      },
    };
    throw hostile;
  },
};

interface Variant {
  name: string;
  provider: Provider;
  run: (session: RunnerSession) => Promise<unknown>;
}
const base = () => `${held.fake.base}/openai/v1`;
const VARIANTS: Variant[] = [
  ...(['openai', 'openai-responses'] as Provider[]).map((provider): Variant => ({
    name: `ai-sdk (${provider === 'openai' ? 'Chat Completions' : 'Responses'})`,
    provider,
    run: (session) => {
      const tools: ToolSet = Object.fromEntries(
        Object.entries(execs).map(([name, execute]) => [name, aiTool({ description: name, inputSchema: parameters, execute })]),
      );
      const openai = createOpenAI({ apiKey: 'sk', baseURL: base() });
      return runAiSdkTurns(session, { model: provider === 'openai' ? openai.chat('fake-model') : openai.responses('fake-model'), tools, maxSteps: 4 });
    },
  })),
  ...(['openai', 'openai-responses'] as Provider[]).map((provider): Variant => ({
    name: `openai-agents (${provider === 'openai' ? 'Chat Completions' : 'Responses'})`,
    provider,
    run: async (session) => {
      const model = await new OpenAIProvider({ apiKey: 'sk', baseURL: base(), useResponses: provider === 'openai-responses' }).getModel('fake-model');
      const tools = Object.entries(execs).map(([name, execute]) => agentsTool({ name, description: name, parameters, execute }));
      return runAgentsTurns(session, new Agent({ name: 'hostile', model, tools }), { maxTurns: 4 });
    },
  })),
];

async function serve(s: { id: string; pool: string }, variant: Variant) {
  const runner = new ForklineRunner({ url: held.app.url, pool: s.pool });
  try {
    await runner.serve(s.id, (session) => variant.run(session).then(() => {}));
  } finally {
    await runner.close();
  }
}

/** A Responses API response's fields (its status and output aside) as the fake streams them. */
const responseOf = (id: string) => ({
  id,
  object: 'response',
  created_at: 1,
  model: 'fake-model',
  usage: { input_tokens: 5, output_tokens: 1, total_tokens: 6 },
});

/** A stream that stops in the middle of a call: its start and half its arguments, then the connection ends (no finish, no [DONE]). */
const cutMidCall =
  (c: Call) =>
  (provider: Provider): string[] =>
    provider === 'openai-responses'
      ? [
          sse({ type: 'response.created', response: { id: 'resp_cut', created_at: 1, model: 'fake-model', status: 'in_progress', output: [] } }),
          sse({ type: 'response.output_item.added', output_index: 0, item: { type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: '' } }),
          sse({ type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 0, delta: c.arguments.slice(0, 5) }),
        ]
      : [
          sse(chatChunk({ role: 'assistant', tool_calls: [{ index: 0, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] })),
          sse(chatChunk({ tool_calls: [{ index: 0, function: { arguments: c.arguments.slice(0, 5) } }] })),
        ];

/** A stream that stops after a call's whole arguments, before the answer's end (no finish, no [DONE]). */
const cutAfterArgs =
  (c: Call) =>
  (provider: Provider): string[] =>
    provider === 'openai-responses'
      ? [
          sse({ type: 'response.created', response: { id: 'resp_cut', created_at: 1, model: 'fake-model', status: 'in_progress', output: [] } }),
          sse({
            type: 'response.output_item.done',
            output_index: 0,
            item: { type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' },
          }),
        ]
      : [sse(chatChunk({ role: 'assistant', tool_calls: [{ index: 0, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }] }))];

/**
 * A call given whole, then the provider's error event (Chat Completions: a chunk holding `error`; Responses: an
 * `error` event), then, where `finish`, the answer's end as if nothing had happened (a finish reason and [DONE];
 * response.completed holding the call).
 */
const callThenError =
  (c: Call, finish: boolean) =>
  (provider: Provider): string[] => {
    const error = { message: 'the provider failed mid-answer', type: 'server_error', code: 'server_error', param: null };
    if (provider === 'openai-responses') {
      const response = responseOf('resp_err');
      const item = { type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' };
      return [
        sse({ type: 'response.created', response: { ...response, status: 'in_progress', output: [] } }),
        sse({ type: 'response.output_item.done', output_index: 0, item }),
        sse({ type: 'error', code: 'server_error', message: error.message, param: null, sequence_number: 3 }),
        ...(finish ? [sse({ type: 'response.completed', response: { ...response, status: 'completed', output: [item] } })] : []),
      ];
    }
    return [
      sse(chatChunk({ role: 'assistant', tool_calls: [{ index: 0, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }] })),
      sse({ error }),
      ...(finish ? [sse(chatChunk({}, 'tool_calls', { usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } })), sse('[DONE]')] : []),
    ];
  };

/** One answer holding a call, then text after it (Chat Completions: a content delta after the tool_calls delta; Responses: a message item after the call). */
const textAfterCall =
  (c: Call, text: string) =>
  (provider: Provider): string[] => {
    if (provider === 'openai-responses') {
      const response = responseOf('resp_after');
      const items = [
        { type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' },
        { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] },
      ];
      return [
        sse({ type: 'response.created', response: { ...response, status: 'in_progress', output: [] } }),
        sse({ type: 'response.output_item.done', output_index: 0, item: items[0] }),
        // The message as the API streams it: added, its text in deltas, done.
        sse({ type: 'response.output_item.added', output_index: 1, item: { ...items[1], status: 'in_progress', content: [] } }),
        sse({
          type: 'response.content_part.added',
          item_id: 'msg_1',
          output_index: 1,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [] },
        }),
        sse({ type: 'response.output_text.delta', item_id: 'msg_1', output_index: 1, content_index: 0, delta: text }),
        sse({ type: 'response.output_item.done', output_index: 1, item: items[1] }),
        sse({ type: 'response.completed', response: { ...response, status: 'completed', output: items } }),
      ];
    }
    return [
      sse(chatChunk({ role: 'assistant', tool_calls: [{ index: 0, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }] })),
      sse(chatChunk({ content: text })),
      sse(chatChunk({}, 'tool_calls', { usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } })),
      sse('[DONE]'),
    ];
  };

/** One call whose arguments ({"key": "xxx…"}) of `bytes` come in deltas of `delta` bytes. */
const hugeArguments =
  (id: string, bytes: number, delta: number) =>
  (provider: Provider): string[] => {
    const args = `{"key":"${'x'.repeat(bytes)}"}`;
    const pieces: string[] = [];
    for (let i = 0; i < args.length; i += delta) pieces.push(args.slice(i, i + delta));
    if (provider === 'openai-responses') {
      const response = responseOf('resp_huge');
      const item = { type: 'function_call', id: 'fc_1', call_id: id, name: 'lookup', arguments: args, status: 'completed' };
      return [
        sse({ type: 'response.created', response: { ...response, status: 'in_progress', output: [] } }),
        sse({ type: 'response.output_item.added', output_index: 0, item: { ...item, arguments: '', status: 'in_progress' } }),
        ...pieces.map((d) => sse({ type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 0, delta: d })),
        sse({ type: 'response.output_item.done', output_index: 0, item }),
        sse({ type: 'response.completed', response: { ...response, status: 'completed', output: [item] } }),
      ];
    }
    return [
      sse(chatChunk({ role: 'assistant', tool_calls: [{ index: 0, id, type: 'function', function: { name: 'lookup', arguments: '' } }] })),
      ...pieces.map((d) => sse(chatChunk({ tool_calls: [{ index: 0, function: { arguments: d } }] }))),
      sse(chatChunk({}, 'tool_calls', { usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } })),
      sse('[DONE]'),
    ];
  };

const look = (id: string, key: string, name = 'lookup'): Call => ({ id, name, arguments: JSON.stringify({ key }) });

/**
 * Forks `id` after its last event, sends the fork a message and serves it: the provider takes its request and the turn
 * completes. Answers the fork's request body.
 */
async function expectForkServed(s: { id: string; pool: string }, variant: Variant): Promise<any> {
  const log = await logOf(s.id);
  const r = await held.app.ok(`mutation($id: ID!, $at: Int!) { forkSession(input: { sessionId: $id, atSeq: $at }) { session { id } } }`, {
    id: s.id,
    at: log.length - 1,
  });
  const child = r.forkSession.session.id as string;
  await send(child, 'go on');
  held.script = ['went on'];
  const from = held.fake.received.length;
  await serve({ id: child, pool: s.pool }, variant);
  expect(held.fake.received.slice(from).map((q) => q.refusal)).toEqual([undefined]);
  expect((await logOf(child)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  return held.fake.received.at(-1)!.body;
}

/** The tool outputs a request's body hands the model, by call id. */
const toolOutputs = (provider: Provider, body: any): Record<string, string> =>
  Object.fromEntries(
    provider === 'openai-responses'
      ? body.input.filter((i: any) => i.type === 'function_call_output').map((i: any) => [i.call_id, i.output])
      : body.messages.filter((m: any) => m.role === 'tool').map((m: any) => [m.tool_call_id, m.content]),
  );

const toolCallsOf = (log: Awaited<ReturnType<typeof logOf>>) => messages(log).flatMap((m) => m.toolCalls as Call[]);
const errorsOf = (log: Awaited<ReturnType<typeof logOf>>) => log.filter((e) => e.type === 'plugin/agent/error').map((e) => e.data.message as string);

/** Serves a session of `text` whose provider answers with `script`; the tools' runs are in held.ran. */
async function served(variant: Variant, script: Answer[]) {
  const s = await session('go');
  held.script = [...script];
  held.ran = [];
  await serve(s, variant);
  return { s, log: await logOf(s.id) };
}

describe.each(VARIANTS)('$name', (variant) => {
  it.each([
    ['in the middle of a call', cutMidCall(look('c_cut', 'a'))],
    ["after a call's whole arguments", cutAfterArgs(look('c_whole', 'a'))],
  ])(
    'takes a stream that stops %s (no finish, no [DONE]) as forkline takes it: no call stored or run, the turn failed saying so',
    async (_where, answer) => {
      const { s, log } = await served(variant, [answer, 'answered']);
      expect(held.ran).toEqual([]);
      expect(toolCallsOf(log)).toEqual([]);
      expect(results(log)).toEqual([]);
      // Forkline's own agent's words; the Agents SDK's Responses model fails such a stream itself.
      expect(errorsOf(log)).toEqual([expect.stringMatching(/ended before the answer did|did not produce a final response/)]);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
      await expectForkServed(s, variant);
    },
    60_000,
  );

  it.each([
    ['then the stream ends', false],
    ['then the answer ends as if whole', true],
  ])(
    'agrees with what ran for a call followed by an error event, %s: a call the log answers as not run never ran',
    async (_what, finish) => {
      const { s, log } = await served(variant, [callThenError(look('c_err', 'a'), finish as boolean), 'answered']);
      const ran = results(log).filter((r) => r.status === 'ok');
      // The tool ran only for a call the log holds answered as run; a call the log answers otherwise never ran.
      expect(held.ran).toEqual(ran.map(() => 'a'));
      expect(toolCallsOf(log).map((c) => c.id)).toEqual(results(log).map((r) => r.callId));
      if (held.ran.length === 0) {
        expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
        expect(errorsOf(log)).toEqual([expect.stringMatching(/failed mid-answer|unsuccessful terminal state/)]);
      }
      await expectForkServed(s, variant);
    },
    60_000,
  );

  it('records a tool that throws what is not an Error (a string, undefined, an object whose text forms throw) as an error, with what the model read', async () => {
    const { s, log } = await served(variant, [[look('c_s', 'string', 'odd'), look('c_u', 'undefined', 'odd'), look('c_h', 'hostile', 'odd')], 'answered']);
    expect(held.ran).toEqual(['odd string', 'odd undefined', 'odd hostile']);
    const read = toolOutputs(variant.provider, held.fake.received.at(-1)!.body);
    const stored = results(log);
    expect(stored.map((r) => [r.callId, r.status])).toEqual(['c_s', 'c_u', 'c_h'].map((callId) => [callId, 'error']));
    // Each adapter hands the model a result as a request built from the log renders it (an error's text marked
    // `Error: `), so a fork sends what the turn sent.
    expect(stored.map((r) => read[r.callId])).toEqual(stored.map((r) => `Error: ${r.content}`));
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    // A fork continued from the log hands the model what the turn did.
    expect(toolOutputs(variant.provider, await expectForkServed(s, variant))).toEqual(read);
  }, 60_000);

  it('records parallel calls where one tool throws synchronously: each answered, the others run, the turn goes on', async () => {
    const { s, log } = await served(variant, [[look('c_a', 'a'), look('c_b', 'b', 'boom'), look('c_c', 'c')], 'answered']);
    expect(held.ran.sort()).toEqual(['a', 'boom b', 'c']);
    expect(toolCallsOf(log).map((c) => c.id)).toEqual(['c_a', 'c_b', 'c_c']);
    const byId = Object.fromEntries(results(log).map((r) => [r.callId, r.status]));
    expect(byId).toEqual({ c_a: 'ok', c_b: 'error', c_c: 'ok' });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    await expectForkServed(s, variant);
  }, 60_000);

  it('stores the text an answer gives after its call with the call', async () => {
    const { s, log } = await served(variant, [textAfterCall(look('c_t', 'a'), 'and some text after'), 'answered']);
    expect(held.ran).toEqual(['a']);
    expect(messages(log)[0]).toMatchObject({ text: 'and some text after', toolCalls: [{ id: 'c_t' }] });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    await expectForkServed(s, variant);
  }, 60_000);

  it('records a call id of 10 KB with control characters under its position, answered, never run; a short one with them as given, run', async () => {
    const long = await served(variant, [[look(`c\u0001\u001b[31m\n${'x'.repeat(10_000)}`, 'a')], 'answered']);
    expect(held.ran).toEqual([]);
    expect(results(long.log)).toEqual([{ callId: 'call_1', status: 'error', content: 'not run: the model gave it an id of 10008 characters (1-200 allowed)' }]);
    expect(long.log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    await expectForkServed(long.s, variant);

    const id = 'c\u0001\u001b[31m\n\t"x';
    const short = await served(variant, [[look(id, 'a')], 'answered']);
    expect(held.ran).toEqual(['a']);
    expect(results(short.log)).toEqual([{ callId: id, status: 'ok', content: 'value of a' }]);
    expect(short.log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    await expectForkServed(short.s, variant);
  }, 60_000);

  it('runs no tool for a call of 20 MB of arguments in 256-byte deltas: the server refuses it, and the turn fails saying so', async () => {
    const { s, log } = await served(variant, [hugeArguments('c_huge', 20 * 1024 * 1024, 256), 'answered']);
    expect(held.ran).toEqual([]);
    expect(toolCallsOf(log)).toEqual([]);
    expect(errorsOf(log)).toEqual([expect.stringMatching(/refused the runner's batch: Request body too large/)]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
    await expectForkServed(s, variant);
  }, 120_000);
});
