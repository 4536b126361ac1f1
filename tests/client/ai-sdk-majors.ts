// The AI SDK adapter (@forkline/ai-sdk) with each major of the SDK a team may
// run it with (its peer range, packages/ai-sdk/README.md): the cases below
// run once per test file that imports them, with whatever `ai` and
// `@ai-sdk/openai` that file's module graph resolves (ai-sdk-v6.test.ts: the
// installed ai 6; ai-sdk-v7.test.ts: ai 7 and @ai-sdk/openai 4, the
// `ai-v7` and `@ai-sdk/openai-v4` npm aliases). The real OpenAI chat model
// talks to a fake provider speaking the Chat Completions wire format, through
// the real server (docs/runners.md, "Why the call goes first"):
//
// - every call of a step is in the log before any of its tools runs;
// - a call the server refuses to store never runs, and the turn ends failed;
// - a session's instructions (and compaction summaries) reach the model as
//   system messages: ai 7 refuses system messages in `messages` by default;
// - a tool that needs approval waits in the log, then runs once approved;
// - a call cancelled before its tool started is answered as not run.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import * as ai from 'ai';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';

/** What the user's message asks the fake model: call these tools (`id`: the call's id), then answer "done". */
interface Directive {
  calls: Array<{ name: string; id?: string }>;
  n: number;
}

export function aiSdkMajorCases(major: 6 | 7): void {
  let app: TestApp;
  /** Each request's messages (role and text), by the user message's text. */
  const requests = new Map<string, Array<Array<{ role: string; text: string }>>>();
  const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));

  /** POST /v1/chat/completions: JSON, or server-sent chunks when `stream` is asked. */
  const provider = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw);
      const messages = (body.messages as Array<{ role: string; content: unknown }>).map((m) => ({ role: m.role, text: text(m.content) }));
      const lastUser = messages.map((m) => m.role).lastIndexOf('user');
      const userText = messages[lastUser].text;
      requests.set(userText, [...(requests.get(userText) ?? []), messages]);
      const answered = messages.slice(lastUser).some((m) => m.role === 'tool');
      const directive = JSON.parse(userText) as Directive;
      const calls = answered
        ? []
        : directive.calls.map((c, index) => ({
            index,
            id: c.id ?? `call_${directive.n}_${index}`,
            type: 'function',
            function: { name: c.name, arguments: '{"n":1}' },
          }));
      const finish = calls.length ? 'tool_calls' : 'stop';
      const base = { id: `chatcmpl_${directive.n}`, created: 1, model: 'fake-model' };
      const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        const message = { role: 'assistant', content: calls.length ? null : 'done', ...(calls.length ? { tool_calls: calls } : {}) };
        res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
        res.write(`data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`);
      chunk([{ index: 0, delta: calls.length ? { role: 'assistant', tool_calls: calls } : { role: 'assistant', content: 'done' }, finish_reason: null }]);
      chunk([{ index: 0, delta: {}, finish_reason: finish }]);
      chunk([], { usage });
      res.end('data: [DONE]\n\n');
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
    it('has every call of a step in the log before any of its tools runs', async () => {
      const { id, pool } = await sessionWith([{ name: 'first' }, { name: 'second' }, { name: 'third' }]);
      const seen: Record<string, string[]> = {};
      const probe = (name: string) =>
        ai.tool({
          inputSchema: parameters,
          execute: async () => {
            const message = (await events(id)).find((e) => e.type === 'model/message');
            seen[name] = (message?.data.toolCalls ?? []).map((c: { name: string }) => c.name);
            return `${name} done`;
          },
        });
      const tools = { first: probe('first'), second: probe('second'), third: probe('third') };
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode, maxSteps: 4 }));
      const all = ['first', 'second', 'third'];
      expect(seen).toEqual({ first: all, second: all, third: all });
      const log = await events(id);
      expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content])).toEqual(
        expect.arrayContaining(all.map((name) => [name, 'ok', `${name} done`])),
      );
      expect(log.filter((e) => e.type === 'model/message').map((e) => e.data.text)).toEqual(['', 'done']);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    });

    it('runs no tool whose call the server refuses to store, and ends the turn failed', async () => {
      const { id, pool } = await sessionWith([{ name: 'send', id: 'c'.repeat(300) }]);
      let ran = 0;
      const tools = { send: ai.tool({ inputSchema: parameters, execute: async () => ++ran }) };
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode })).catch(() => undefined);
      expect(ran).toBe(0);
      const log = await events(id);
      expect(log.some((e) => e.type === 'model/message')).toBe(false);
      expect(log.slice(-3).map((e) => [e.type, e.data.reason, e.synthetic])).toEqual([
        ['step/end', 'failed', false],
        ['plugin/agent/error', undefined, false],
        ['turn/end', 'failed', false],
      ]);
    });

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

    it('asks in the log for a tool that needs approval, runs nothing meanwhile, and runs it once approved', async () => {
      const { id, pool } = await sessionWith([{ name: 'wire_money' }]);
      let ran = 0;
      const tools = { wire_money: ai.tool({ inputSchema: parameters, needsApproval: true, execute: async () => (ran++, 'wired') }) };
      const callId = `call_${sessionNo}_0`;
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      expect(ran).toBe(0);
      const session = `query($id: ID!) { session(id: $id) { status pendingApprovals { callId name } } }`;
      expect((await app.ok(session, { id })).session).toEqual({ status: 'WAITING', pendingApprovals: [{ callId, name: 'wire_money' }] });
      await app.ok(`mutation($i: ToolDecisionInput!) { approveToolCall(input: $i) { status } }`, { i: { sessionId: id, callId } });
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode }));
      expect(ran).toBe(1);
      const log = await events(id);
      expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content])).toEqual([['wire_money', 'ok', 'wired']]);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    });

    it('answers a call cancelled before its tool started as not run', async () => {
      const { id, pool } = await sessionWith([{ name: 'send' }]);
      const cancel = new AbortController();
      let ran = 0;
      let stored: unknown[] = [];
      const tools = {
        send: ai.tool({
          inputSchema: parameters,
          // The SDK has the call (so it is in the log) and is about to run it: the app stops now.
          onInputAvailable: async () => {
            stored = (await events(id)).filter((e) => e.type === 'model/message');
            cancel.abort(new Error('the app is stopping'));
          },
          execute: async () => ++ran,
        }),
      };
      await serve(id, pool, (s) => runAiSdkTurns(s, { model: model(), tools, mode, signal: cancel.signal }));
      expect(stored).toHaveLength(1);
      expect(ran).toBe(0);
      const log = await events(id);
      expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ status: 'error', content: expect.stringMatching(/did not run/) });
      expect(log.at(-1)!.data).toMatchObject({ reason: 'failed' });
    });
  });
}
