// The AI SDK adapter (@forkline/ai-sdk) with each major of the SDK a team may
// run it with (its peer range, packages/ai-sdk/README.md): the cases below
// run once per test file that imports them, with whatever `ai` and
// `@ai-sdk/openai` that file's module graph resolves (ai-sdk-v6.test.ts: the
// installed ai 6; ai-sdk-v7.test.ts: ai 7 and @ai-sdk/openai 4, the
// `ai-v7` and `@ai-sdk/openai-v4` npm aliases, which also runs the adapter
// edge and approval tests on them). The real OpenAI chat model talks to a fake
// provider speaking the Chat Completions wire format, through the real server:
// a session's instructions reach the model as its system message, in both
// modes (ai 7 refuses system messages in `messages` unless they are allowed);
// a tool's `toModelOutput` is what the log holds and what the model is handed
// (its raw output, a secret, never reaches the log nor a later request), also
// for an approved call run after its decision.
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import * as ai from 'ai';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns, type AiSdkRunOptions } from '@forkline/ai-sdk';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { chatCompletionsAnswer } from '../helpers/provider-sse.ts';

/** What the user's message asks the fake model: call these tools, then answer "done". */
interface Directive {
  calls: Array<{ name: string }>;
  n: number;
}

export function aiSdkMajorCases(major: 6 | 7): void {
  let app: TestApp;
  /** Each request's messages (role and text), by the user message's text. */
  const requests = new Map<string, Array<Array<{ role: string; text: string }>>>();
  /** Each request's messages as the provider package sent them, by the user message's text. */
  const bodies = new Map<string, unknown[][]>();
  const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));

  /** POST /v1/chat/completions: the directive's calls, then "done" once the request holds their results. */
  const provider = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw);
      const messages = (body.messages as Array<{ role: string; content: unknown }>).map((m) => ({ role: m.role, text: text(m.content) }));
      const lastUser = messages.map((m) => m.role).lastIndexOf('user');
      const userText = messages[lastUser].text;
      requests.set(userText, [...(requests.get(userText) ?? []), messages]);
      bodies.set(userText, [...(bodies.get(userText) ?? []), body.messages]);
      const answered = messages.slice(lastUser).some((m) => m.role === 'tool');
      const directive = JSON.parse(userText) as Directive;
      const calls = answered
        ? []
        : directive.calls.map((c, index) => ({
            index,
            id: `call_${directive.n}_${index}`,
            type: 'function',
            function: { name: c.name, arguments: '{"n":1}' },
          }));
      chatCompletionsAnswer(res, body, { id: `chatcmpl_${directive.n}`, calls, text: 'done' });
    });
  });

  let providerUrl = '';
  beforeAll(async () => {
    app = await startTestApp();
    await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
    providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
  });
  afterAll(async () => {
    provider.close();
    await app?.close();
  });

  const events = async (id: string) =>
    (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ seq: e.seq, type: e.type, data: anyData(e), synthetic: e.synthetic }));
  let sessionNo = 0;
  /** A session of a pool of its own with the directive as its message. */
  async function sessionWith(calls: Directive['calls'], extra: { instructions?: string } = {}) {
    const pool = `ai${major}-${++sessionNo}`;
    const id = (await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: { runner: pool, ...extra } })).createSession
      .id as string;
    const message = JSON.stringify({ calls, n: sessionNo } satisfies Directive);
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: message } });
    return { id, pool, message };
  }
  const parameters = z.object({ n: z.number() });
  const model = () => createOpenAI({ apiKey: 'test', baseURL: providerUrl }).chat('fake-model');
  /** Serves the session once with a runner of its own. */
  async function serve(id: string, pool: string, run: (s: RunnerSession) => Promise<unknown>) {
    const runner = new ForklineRunner({ url: app.url, pool });
    try {
      return await runner.serve(id, (s) => run(s).then(() => {}));
    } finally {
      await runner.close();
    }
  }

  it(`runs with ai ${major}`, () => {
    // ai 7 added isStepCount (stepCountIs stays as its alias): the file's `ai` is the major it says.
    expect(typeof (ai as Record<string, unknown>).isStepCount).toBe(major === 7 ? 'function' : 'undefined');
  });

  describe.each(['stream', 'generate'] as const)(`ai ${major}, %s`, (mode) => {
    it("gives the model the session's instructions as its system message", async () => {
      const instructions = 'Answer in French.';
      const { id, pool, message } = await sessionWith([{ name: 'lookup' }], { instructions });
      const tools = { lookup: ai.tool({ inputSchema: parameters, execute: async () => 'found' }) };
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      const log = await events(id);
      expect(log.filter((e) => e.type === 'plugin/agent/error').map((e) => e.data.message)).toEqual([]);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      // Both requests of the turn began with the instructions.
      expect(requests.get(message)!.map((m) => m[0])).toEqual([
        { role: 'system', text: instructions },
        { role: 'system', text: instructions },
      ]);
    });

    it("stores what a tool's toModelOutput hands the model, not its raw output: later requests never see what it withheld", async () => {
      const { id, pool, message } = await sessionWith([{ name: 'account' }, { name: 'parts' }, { name: 'counted' }, { name: 'refused' }]);
      const tools = {
        account: ai.tool({
          inputSchema: parameters,
          execute: async () => ({ owner: 'ada', secret: 'SECRET-4711' }),
          toModelOutput: () => ({ type: 'text' as const, value: '[withheld]' }),
        }),
        parts: ai.tool({
          inputSchema: parameters,
          execute: async () => 'SECRET-4711 in the raw output',
          toModelOutput: () => ({
            type: 'content' as const,
            value: [
              { type: 'text' as const, text: 'first part' },
              { type: 'text' as const, text: 'second part' },
            ],
          }),
        }),
        counted: ai.tool({
          inputSchema: parameters,
          execute: async ({ n }) => ({ n, secret: 'SECRET-4711' }),
          toModelOutput: ({ output }) => ({ type: 'json' as const, value: { n: (output as { n: number }).n } }),
        }),
        refused: ai.tool({
          inputSchema: parameters,
          execute: async () => 'SECRET-4711',
          toModelOutput: () => ({ type: 'error-text' as const, value: 'not for you' }),
        }),
      };
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      const results = (await events(id)).filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content]);
      expect(results).toEqual([
        ['account', 'ok', '[withheld]'],
        ['parts', 'ok', 'first part\nsecond part'],
        ['counted', 'ok', '{"n":1}'],
        ['refused', 'error', 'not for you'],
      ]);
      // The model was handed in the turn what the log holds, as a request built from the log renders it (an error
      // result marked `Error: `): a later request, or a fork, is built from the log.
      const handed = requests
        .get(message)![1]
        .filter((m) => m.role === 'tool')
        .map((m) => m.text);
      expect(handed).toEqual(results.map((r) => (r[1] === 'error' ? `Error: ${r[2]}` : r[2])));

      // The next turn's request, built from the log, has none of it either.
      const next = JSON.stringify({ calls: [], n: sessionNo });
      await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: next } });
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      expect(requests.get(next)).toHaveLength(1);
      expect(
        requests
          .get(next)![0]
          .filter((m) => m.role === 'tool')
          .map((m) => m.text),
      ).toEqual(handed);
      expect(JSON.stringify([...requests.get(message)!, ...requests.get(next)!])).not.toContain('SECRET-4711');
    });

    // What the SDK hands the model for a call whose `execute` throws depends on the major and the provider package
    // (ai 6: the error's message; ai 7 with @ai-sdk/openai 4: `{"error": "Error: <message>"}`), while a request
    // forkline builds from the log renders an error result `Error: <content>` (docs/runners.md, "What a tool hands
    // back"): the turn hands the model the latter, so a fork continued from the log sends what the turn sent.
    /** A request's messages, short enough to read in a failure (an error text may be megabytes). */
    const digest = (v: unknown) => {
      const json = JSON.stringify(v);
      return { length: json.length, head: json.slice(0, 300), sha256: createHash('sha256').update(json).digest('hex') };
    };
    const thrown: Array<[string, () => unknown, string | RegExp]> = [
      ['an Error', () => new Error('disk full'), 'disk full'],
      ['an Error whose message is JSON', () => new Error('{"error":"x"}'), '{"error":"x"}'],
      ['a string', () => 'quota exceeded', 'quota exceeded'],
      ['an object', () => ({ code: 42 }), '{"code":42}'],
      ['null', () => null, 'unknown error'],
      ['an Error holding a NUL', () => new Error('bad\u0000byte'), 'bad\uFFFDbyte'],
      ['an Error over maxResultBytes', () => new Error('x'.repeat(1_200_000)), /^the tool ran, but its output \(1200000 bytes\) is over/],
    ];
    it.each(thrown)(
      'hands the model a call that threw %s as the log holds it: a fork continued from the log sends what the turn sent',
      async (_, error, said) => {
        const { id, pool, message } = await sessionWith([{ name: 'failing' }]);
        const tools = {
          failing: ai.tool({
            inputSchema: parameters,
            execute: async (): Promise<string> => {
              throw error();
            },
          }),
        };
        await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
        const log = await events(id);
        const results = log.filter((e) => e.type === 'tool/result').map((e) => e.data);
        expect(results).toEqual([expect.objectContaining({ status: 'error', content: typeof said === 'string' ? said : expect.stringMatching(said) })]);
        expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
        const [, answered] = bodies.get(message)!;
        const handed = answered.filter((m) => (m as { role: string }).role === 'tool');
        expect(digest(handed)).toEqual(digest([{ role: 'tool', tool_call_id: `call_${sessionNo}_0`, content: `Error: ${results[0].content}` }]));

        // A fork of the turn, continued by the adapter from the log: its request begins with what the turn's last one sent.
        const child = (await app.ok(`mutation($id: ID!) { forkSession(input: {sessionId: $id}) { session { id } } }`, { id })).forkSession.session.id as string;
        const next = JSON.stringify({ calls: [], n: `${sessionNo}-fork` });
        await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: child, text: next } });
        await serve(child, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
        const [forked] = bodies.get(next)!;
        expect(digest(forked.slice(0, answered.length))).toEqual(digest(answered));
      },
    );

    it("stores an approved call's toModelOutput when it runs after the decision", async () => {
      const { id, pool, message } = await sessionWith([{ name: 'account' }]);
      const tools = {
        account: ai.tool({
          inputSchema: parameters,
          needsApproval: true,
          execute: async () => ({ owner: 'ada', secret: 'SECRET-4711' }),
          toModelOutput: () => ({ type: 'text' as const, value: '[withheld]' }),
        }),
      };
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      const callId = `call_${sessionNo}_0`;
      await app.ok(`mutation($id: ID!, $call: ID!) { approveToolCall(input: {sessionId: $id, callId: $call}) { status } }`, { id, call: callId });
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      const log = await events(id);
      expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.callId, e.data.status, e.data.content])).toEqual([[callId, 'ok', '[withheld]']]);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      const last = requests.get(message)!.at(-1)!;
      expect(last.filter((m) => m.role === 'tool').map((m) => m.text)).toEqual(['[withheld]']);
      expect(JSON.stringify(requests.get(message))).not.toContain('SECRET-4711');
    });
  });

  describe(`ai ${major}, stream: the app's onChunk and a tool's start`, () => {
    /** POST /v1/chat/completions, streamed as a model generates: a call of lookup, the answer's end a moment later; then "done". */
    const slow = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (c) => (raw += c));
      req.on('end', () => {
        const body = JSON.parse(raw);
        const answered = (body.messages as Array<{ role: string }>).some((m) => m.role === 'tool');
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        const chunk = (delta: unknown, finish: string | null = null) =>
          res.write(
            `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`,
          );
        if (answered) {
          chunk({ role: 'assistant', content: 'done' }, 'stop');
          return void res.end('data: [DONE]\n\n');
        }
        chunk({ role: 'assistant', tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'lookup', arguments: '{"n":1}' } }] });
        setTimeout(() => (chunk({}, 'tool_calls'), res.end('data: [DONE]\n\n')), 50);
      });
    });
    let slowUrl = '';
    beforeAll(async () => {
      await new Promise<void>((resolve) => slow.listen(0, '127.0.0.1', resolve));
      slowUrl = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/v1`;
    });
    afterAll(() => void slow.close());

    it("calls onChunk with a call before its tool's start (experimental_onToolCallStart), as streamText without forkline does", async () => {
      const heard: string[] = [];
      const hooks = {
        onChunk: ({ chunk }: { chunk: { type: string; toolCallId?: string } }) => void (chunk.type === 'tool-call' && heard.push(`chunk ${chunk.toolCallId}`)),
        experimental_onToolCallStart: ({ toolCall }: { toolCall: { toolCallId: string } }) => void heard.push(`start ${toolCall.toolCallId}`),
      };
      const tools = { lookup: ai.tool({ inputSchema: parameters, execute: async () => 'found' }) };
      const slowModel = () => createOpenAI({ apiKey: 'test', baseURL: slowUrl }).chat('fake-model');
      await ai.streamText({ model: slowModel(), tools, prompt: 'look up', stopWhen: ai.stepCountIs(4), ...(hooks as Record<string, unknown>) }).consumeStream();
      expect(heard).toEqual(['chunk call_1', 'start call_1']);

      heard.length = 0;
      const { id, pool } = await sessionWith([{ name: 'lookup' }]);
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: slowModel(), tools, ...(hooks as Partial<AiSdkRunOptions>) }));
      expect((await events(id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      expect(heard).toEqual(['chunk call_1', 'start call_1']);
    });
  });
}
