// The OpenAI Agents adapter (@forkline/openai-agents) on the real Agents SDK
// and its real OpenAI models (the Responses and the Chat Completions one),
// talking to a fake provider that speaks their wire format: streamed server-
// sent events as the OpenAI API sends them. A turn that calls a tool with side
// effects has the call in the log before the tool runs, its text deltas reach
// sessionTurns subscribers, and each response's usage is recorded.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, OpenAIProvider, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';
import { ForklineRunner } from '@forkline/runner';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { openSubscriptions, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';

let app: TestApp;
let runner: ForklineRunner;

/** What the fake provider got: path and body of each request, in order. */
const requests: Array<{ path: string; body: any }> = [];
const ANSWER = (output: string) => `Sent: ${output}`;
const USAGE = { call: { input: 11, output: 5 }, answer: { input: 13, output: 4 } };

/** The user's text and the tool's output, if any, of a request in either API's format. */
function readRequest(path: string, body: any): { user: string; toolOutput?: string } {
  const texts = (content: any) => (typeof content === 'string' ? content : (content ?? []).map((p: any) => p.text ?? '').join(''));
  if (path.endsWith('/responses')) {
    const items = body.input as any[];
    const result = items.find((i) => i.type === 'function_call_output');
    const user = items.filter((i) => i.role === 'user').at(-1);
    return { user: texts(user?.content), toolOutput: result && (typeof result.output === 'string' ? result.output : texts(result.output)) };
  }
  const messages = body.messages as any[];
  const result = messages.find((m) => m.role === 'tool');
  return { user: texts(messages.filter((m) => m.role === 'user').at(-1)?.content), toolOutput: result && texts(result.content) };
}

/** A Responses API stream: the response created, its one output item built up, the response completed with its usage. */
function responsesEvents(n: number, call: { id: string; args: string } | undefined, text: string): unknown[] {
  const usage = call ? USAGE.call : USAGE.answer;
  const base = {
    id: `resp_${n}`,
    object: 'response',
    created_at: 1,
    model: 'fake-model',
    output: [] as unknown[],
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
  };
  const item = call
    ? { type: 'function_call', id: `fc_${n}`, call_id: call.id, name: 'send_email', arguments: call.args, status: 'completed' }
    : { type: 'message', id: `msg_${n}`, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text, annotations: [] }] };
  const events: Array<Record<string, unknown>> = [
    { type: 'response.created', response: { ...base, status: 'in_progress' } },
    {
      type: 'response.output_item.added',
      output_index: 0,
      item: call ? { ...item, arguments: '', status: 'in_progress' } : { ...item, status: 'in_progress', content: [] },
    },
  ];
  if (call) {
    events.push({ type: 'response.function_call_arguments.delta', item_id: item.id, output_index: 0, delta: call.args });
    events.push({ type: 'response.function_call_arguments.done', item_id: item.id, output_index: 0, arguments: call.args });
  } else {
    const part = { item_id: item.id, output_index: 0, content_index: 0 };
    events.push({ type: 'response.content_part.added', ...part, part: { type: 'output_text', text: '', annotations: [] } });
    // Two deltas: the text as it is generated.
    for (const delta of [text.slice(0, 6), text.slice(6)]) events.push({ type: 'response.output_text.delta', ...part, delta, logprobs: [] });
    events.push({ type: 'response.output_text.done', ...part, text, logprobs: [] });
  }
  events.push({ type: 'response.output_item.done', output_index: 0, item });
  events.push({
    type: 'response.completed',
    response: {
      ...base,
      status: 'completed',
      output: [item],
      usage: {
        input_tokens: usage.input,
        output_tokens: usage.output,
        total_tokens: usage.input + usage.output,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 },
      },
    },
  });
  return events.map((e, i) => ({ ...e, sequence_number: i }));
}

/** A Chat Completions stream: chunks of the call or of the text, the finish, then the usage chunk (stream_options.include_usage). */
function chatChunks(n: number, call: { id: string; args: string } | undefined, text: string): unknown[] {
  const usage = call ? USAGE.call : USAGE.answer;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
    id: `chatcmpl_${n}`,
    object: 'chat.completion.chunk',
    created: 1,
    model: 'fake-model',
    choices,
    ...extra,
  });
  const delta = (d: Record<string, unknown>, finish: string | null = null) => chunk([{ index: 0, delta: d, finish_reason: finish }]);
  const body = call
    ? [
        delta({ role: 'assistant', tool_calls: [{ index: 0, id: call.id, type: 'function', function: { name: 'send_email', arguments: '' } }] }),
        delta({ tool_calls: [{ index: 0, function: { arguments: call.args } }] }),
        delta({}, 'tool_calls'),
      ]
    : [delta({ role: 'assistant', content: text.slice(0, 6) }), delta({ content: text.slice(6) }), delta({}, 'stop')];
  return [...body, chunk([], { usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } })];
}

/** POST /v1/responses and /v1/chat/completions, streamed: a call of send_email to the user's text, then, given its output, a text answer. */
const provider = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    const body = JSON.parse(raw);
    const path = req.url ?? '';
    requests.push({ path, body });
    const { user, toolOutput } = readRequest(path, body);
    const call = toolOutput === undefined ? { id: `call_${requests.length}`, args: JSON.stringify({ to: user }) } : undefined;
    const text = toolOutput === undefined ? '' : ANSWER(toolOutput);
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (path.endsWith('/responses')) {
      for (const e of responsesEvents(requests.length, call, text)) res.write(`event: ${(e as { type: string }).type}\ndata: ${JSON.stringify(e)}\n\n`);
    } else {
      for (const c of chatChunks(requests.length, call, text)) res.write(`data: ${JSON.stringify(c)}\n\n`);
      res.write('data: [DONE]\n\n');
    }
    res.end();
  });
});

beforeAll(async () => {
  setTracingDisabled(true);
  app = await startTestApp();
  runner = new ForklineRunner({ url: app.url, pool: 'agents-wire' });
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await runner?.close();
  await app.close();
  provider.close();
});

describe.each([
  ['Responses', true, '/v1/responses'],
  ['Chat Completions', false, '/v1/chat/completions'],
])('the Agents adapter on the real OpenAI %s model', (_api, useResponses, path) => {
  it('runs a turn whose side-effect tool runs after its call is in the log, streaming its text and recording usage', async () => {
    const { port } = provider.address() as AddressInfo;
    const model = await new OpenAIProvider({ apiKey: 'test', baseURL: `http://127.0.0.1:${port}/v1`, useResponses }).getModel('fake-model');
    const id = (await app.ok(`mutation { createSession(input: {runner: "agents-wire"}) { id } }`)).createSession.id as string;
    /** The log as the tool found it when it ran. */
    let atRun: Array<{ type: string; data: any }> = [];
    let ranFor: string | undefined;
    const agent = new Agent({
      name: 'mailer',
      instructions: 'Send what you are asked to.',
      model,
      tools: [
        tool({
          name: 'send_email',
          description: 'Sends an email.',
          parameters: z.object({ to: z.string() }),
          execute: async ({ to }, _ctx, details) => {
            atRun = (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data }));
            ranFor = details?.toolCall?.callId;
            return `sent to ${to}`;
          },
        }),
      ],
    });
    const open = await openSubscriptions(app.url);
    const turns = subscribeWs(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind turn text } }`, { id });
    await subscriptionsOpened(app.url, open, 1); // TEXT_DELTA is not replayed
    const from = requests.length;
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'bob@example.com' } });
    expect(await runner.serve(id, (s) => runAgentsTurns(s, agent, { effects: { send_email: 'side-effects' } }).then(() => {}))).toBe(true);

    // The provider was spoken to in its format, streamed; its second request carried the tool's output for its call.
    const sent = requests.slice(from);
    expect(sent.map((r) => [r.path, r.body.stream])).toEqual([
      [path, true],
      [path, true],
    ]);
    const callId = `call_${from + 1}`;
    expect(readRequest(path, sent[1].body).toolOutput).toBe('sent to bob@example.com');

    // The call, with its declared effect, was in the log before the tool ran.
    expect(ranFor).toBe(callId);
    const callMessage = atRun.find((e) => e.type === 'model/message');
    expect(callMessage?.data.toolCalls).toEqual([
      { id: callId, name: 'send_email', arguments: JSON.stringify({ to: 'bob@example.com' }), effect: 'side-effects' },
    ]);
    expect(atRun.some((e) => e.type === 'tool/result')).toBe(false);

    const evs = await app.services.store.log.page(id, -1, 1000);
    expect(evs.map((e) => e.type)).toEqual([
      'inbox/add',
      'session/runner-tools',
      'inbox/remove',
      'turn/start',
      'step/start',
      'model/message',
      'tool/result',
      'step/end',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    const [call, answer] = evs.filter((e) => e.type === 'model/message').map((e) => e.data as any);
    expect(call.usage).toEqual({ inputTokens: USAGE.call.input, outputTokens: USAGE.call.output });
    expect(answer).toMatchObject({
      text: ANSWER('sent to bob@example.com'),
      toolCalls: [],
      usage: { inputTokens: USAGE.answer.input, outputTokens: USAGE.answer.output },
    });
    expect(evs.find((e) => e.type === 'tool/result')!.data).toMatchObject({ callId, status: 'ok', content: 'sent to bob@example.com', name: 'send_email' });
    expect(evs.at(-1)!.data).toMatchObject({ turn: 1, reason: 'completed' });

    // Its text reached subscribers as the provider streamed it (the server merges adjacent deltas a subscriber has not taken yet).
    await turns.until((items) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'TURN_ENDED');
    const deltas = turns.items.filter((u) => u.sessionTurns.kind === 'TEXT_DELTA').map((u) => u.sessionTurns.text);
    expect(deltas.join('')).toBe(ANSWER('sent to bob@example.com'));
    await turns.close();
  });
});
