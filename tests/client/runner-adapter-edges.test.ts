// The adapters at their edges, with the real frameworks: the AI SDK's
// streamText/generateText (@forkline/ai-sdk) and the OpenAI Agents SDK's
// run, streamed or not (@forkline/openai-agents), on the real OpenAI chat
// model packages talking to a fake provider that speaks the Chat Completions
// wire format, through the real server (docs/runners.md, "Why the call goes
// first" and "What a tool hands back").
//
// - The call's append fails (the lease lost to another runner, the server
//   gone, the arguments over the body limit, a batch the rules refuse): the
//   tool does not run. Parallel calls are all in the log before any runs.
// - A tool's output that is not JSON, or too big to store, is recorded as a
//   result saying the tool ran (never as a call that did not run).
// - An AI SDK tool that streams its output (an async generator) runs, and its
//   last output is its result.
// - A call that fails in the AI SDK (its tool throws, its input breaks the
//   schema, it names no tool) is stored as the error text the SDK hands the
//   model, so a later step or a fork reads what the step itself read.
// (Approval-gated tools: runner-adapter-approvals.test.ts.)
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { tool as aiTool, type ToolSet } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import type { LanguageModelV3Prompt, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { Agent, OpenAIProvider, setTracingDisabled, tool as agentsTool } from '@openai/agents';
import { ForklineRunner, LeaseLostError, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { chatCompletionsAnswer } from '../helpers/provider-sse.ts';

let app: TestApp;

/** What the user's message asks the fake model to do: call these tools (then answer "done" once it has their results). */
interface Directive {
  /** `pad`: characters of padding in the arguments (a call too big to store). */
  calls: Array<{ name: string; id?: string; pad?: number }>;
  /** Run before the provider answers the call (the test's hook: take the lease, stop the server). */
  hook?: string;
  /** Answer the first request with a 500 (a retryable provider error: the SDK or its client retries). */
  failFirst?: boolean;
}
/** Directives (their text) whose first request failed. */
const failed = new Set<string>();
const hooks = new Map<string, () => Promise<void>>();
let requestNo = 0;

function reply(body: any): { directive: Directive; calls: Array<{ id: string; name: string; args: string }>; text: string } {
  const messages = body.messages as Array<{ role: string; content: unknown }>;
  const lastUser = messages.map((m) => m.role).lastIndexOf('user');
  const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));
  const directive = JSON.parse(text(messages[lastUser].content)) as Directive;
  if (messages.slice(lastUser).some((m) => m.role === 'tool')) return { directive, calls: [], text: 'done' };
  const n = ++requestNo;
  return {
    directive,
    calls: directive.calls.map((c, i) => ({
      id: c.id ?? `call_${n}_${i}`,
      name: c.name,
      args: JSON.stringify({ n: 1, ...(c.pad ? { pad: 'x'.repeat(c.pad) } : {}) }),
    })),
    text: '',
  };
}

/** POST /v1/chat/completions: JSON, or server-sent chunks when `stream` is asked. */
const provider = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', async () => {
    const { directive, calls, text } = reply(JSON.parse(raw));
    const body = JSON.parse(raw);
    if (directive.failFirst && !failed.has(JSON.stringify(directive))) {
      failed.add(JSON.stringify(directive));
      requestNo--; // the retry is answered as this request would have been
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'overloaded', type: 'server_error' } }));
      return;
    }
    if (calls.length && directive.hook) await hooks.get(directive.hook)?.();
    const toolCalls = calls.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.args } }));
    chatCompletionsAnswer(res, body, { id: `chatcmpl_${requestNo}`, calls: toolCalls, text });
  });
});

/** A TCP door in front of the server that can be shut: the runner's connections are then refused. */
let proxy: net.Server;
const proxied = new Set<net.Socket>();
let proxyUp = true;
async function startProxy(port?: number): Promise<number> {
  proxy = net.createServer((client) => {
    if (!proxyUp) return client.destroy();
    const upstream = net.connect((new URL(app.url).port as unknown as number) * 1, '127.0.0.1');
    proxied.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => (client.destroy(), upstream.destroy());
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  });
  await new Promise<void>((resolve) => proxy.listen(port ?? 0, '127.0.0.1', resolve));
  return (proxy.address() as AddressInfo).port;
}

let providerUrl = '';
let proxyUrl = '';
beforeAll(async () => {
  setTracingDisabled(true);
  app = await startTestApp();
  await new Promise<void>((resolve) => provider.listen(0, '127.0.0.1', resolve));
  providerUrl = `http://127.0.0.1:${(provider.address() as AddressInfo).port}/v1`;
  proxyUrl = `http://127.0.0.1:${await startProxy()}/graphql`;
});
afterAll(async () => {
  proxy?.close();
  for (const s of proxied) s.destroy();
  provider.close();
  await app.close();
});

/** A tool as the test writes it, given to either framework. */
interface TestTool {
  name: string;
  execute: (input: { n: number }) => unknown;
}

interface Variant {
  name: string;
  run: (session: RunnerSession, tools: TestTool[]) => Promise<unknown>;
}

const parameters = z.object({ n: z.number() });
const VARIANTS: Variant[] = [
  ...(['stream', 'generate'] as const).map((mode) => ({
    name: `the AI SDK adapter (${mode === 'stream' ? 'streamText' : 'generateText'})`,
    run: (session: RunnerSession, tools: TestTool[]) => {
      const model = createOpenAI({ apiKey: 'test', baseURL: providerUrl }).chat('fake-model');
      const set: ToolSet = Object.fromEntries(
        tools.map((t) => [
          t.name,
          aiTool<{ n: number }, unknown>({
            description: t.name,
            inputSchema: parameters,
            execute: async (input) => t.execute(input),
          }),
        ]),
      );
      return runAiSdkTurns(session, { model, tools: set, mode, maxSteps: 4 });
    },
  })),
  ...[true, false].map((stream) => ({
    name: `the OpenAI Agents adapter (${stream ? 'streamed' : 'not streamed'})`,
    run: async (session: RunnerSession, tools: TestTool[]) => {
      const model = await new OpenAIProvider({ apiKey: 'test', baseURL: providerUrl, useResponses: false }).getModel('fake-model');
      const agent = new Agent({
        name: 'edges',
        model,
        tools: tools.map((t) => agentsTool({ name: t.name, description: t.name, parameters, execute: (input) => t.execute(input) as never })),
      });
      return runAgentsTurns(session, agent, { stream, maxTurns: 4 });
    },
  })),
];

const events = async (id: string) =>
  (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any, synthetic: e.synthetic }));
let sessionNo = 0;

/** A session of a pool of its own with the directive as its message; `serve` runs the variant on it with `runner`. */
async function sessionWith(directive: Directive) {
  const pool = `edges-${++sessionNo}`;
  const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: JSON.stringify(directive) } });
  return { id, pool };
}

describe.each(VARIANTS)('$name', (variant) => {
  const serve = async (id: string, pool: string, tools: TestTool[], opts: Partial<ConstructorParameters<typeof ForklineRunner>[0]> = {}) => {
    const runner = new ForklineRunner({ url: app.url, pool, ...opts });
    let held: RunnerSession | undefined;
    try {
      await runner.serve(id, (s) => ((held = s), variant.run(s, tools).then(() => {})));
      return { held: held! };
    } finally {
      await runner.close();
    }
  };

  it('runs no tool when the append of its call finds the lease taken by another runner', async () => {
    let ran = 0;
    const hook = `steal-${sessionNo + 1}`;
    const { id, pool } = await sessionWith({ calls: [{ name: 'send' }, { name: 'send' }], hook });
    const thief = new ForklineRunner({ url: app.url, pool, runnerId: 'thief' });
    let taken: RunnerSession | undefined;
    // While the model answers, the lease goes to another runner (the holder's was given back: it paused past its expiry).
    let token = -1;
    hooks.set(hook, async () => {
      await app.ok(`mutation($i: LeaseInput!) { releaseSession(input: $i) { id } }`, { i: { sessionId: id, leaseToken: token } });
      taken = await thief.claim(id);
    });
    const runner = new ForklineRunner({ url: app.url, pool });
    const served = runner.serve(id, (s) => {
      token = s.leaseToken;
      return variant.run(s, [{ name: 'send', execute: () => ran++ }]).then(() => {});
    });
    await expect(served).rejects.toBeInstanceOf(LeaseLostError);
    expect(taken).toBeDefined();
    expect(ran).toBe(0);
    // The first holder's call never reached the log: only the new holder's repair closed the step it had opened.
    const log = await events(id);
    expect(log.some((e) => e.type === 'model/message')).toBe(false);
    expect(log.filter((e) => e.type === 'turn/end').map((e) => [e.data.reason, e.synthetic])).toEqual([['interrupted', true]]);
    await taken!.release();
    await Promise.all([runner.close(), thief.close()]);
  });

  it('runs no tool when the server is gone by the time its call is appended', async () => {
    let ran = 0;
    const hook = `down-${sessionNo + 1}`;
    const { id, pool } = await sessionWith({ calls: [{ name: 'send' }], hook });
    hooks.set(hook, async () => {
      proxyUp = false;
      for (const s of proxied) s.destroy();
    });
    const runner = new ForklineRunner({ url: proxyUrl, pool, retryForMs: 300 });
    try {
      await expect(runner.serve(id, (s) => variant.run(s, [{ name: 'send', execute: () => ran++ }]).then(() => {}))).rejects.toThrow();
    } finally {
      proxyUp = true;
      await runner.close();
    }
    expect(ran).toBe(0);
    expect((await events(id)).some((e) => e.type === 'model/message')).toBe(false);
  });

  it.each([
    ['arguments over the body limit (413)', { calls: [{ name: 'send', pad: 18 * 1024 * 1024 }] }],
    // (A call id the log cannot hold is no longer one: it is recorded under call_<position>, runner-ai-sdk-call-ids.test.ts.)
    ['more calls than a step holds (BAD_USER_INPUT)', { calls: Array.from({ length: 4097 }, () => ({ name: 'send' })) }],
  ])('runs no tool when the server refuses its call: %s', async (_what, directive: Directive) => {
    let ran = 0;
    const { id, pool } = await sessionWith(directive);
    await serve(id, pool, [{ name: 'send', execute: () => ran++ }]).catch(() => undefined);
    expect(ran).toBe(0);
    const log = await events(id);
    expect(log.some((e) => e.type === 'model/message')).toBe(false);
    // The turn is not left open for a repair: the runner ends it failed, saying the server refused its batch.
    expect(log.find((e) => e.type === 'plugin/agent/error')).toMatchObject({ synthetic: false, data: { message: expect.stringMatching(/refused/) } });
    expect(log.slice(-3).map((e) => [e.type, e.data.reason, e.synthetic])).toEqual([
      ['step/end', 'failed', false],
      ['plugin/agent/error', undefined, false],
      ['turn/end', 'failed', false],
    ]);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { status } }`, { id })).session.status).toBe('IDLE');
  });

  it('has every call of a step in the log before any of its tools runs (parallel calls)', async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'first' }, { name: 'second' }, { name: 'third' }] });
    const seen: Record<string, string[]> = {};
    const probe = (name: string) => async () => {
      const message = (await events(id)).find((e) => e.type === 'model/message');
      seen[name] = (message?.data.toolCalls ?? []).map((c: { name: string }) => c.name);
      return `${name} done`;
    };
    await serve(
      id,
      pool,
      ['first', 'second', 'third'].map((name) => ({ name, execute: probe(name) })),
    );
    expect(seen).toEqual({ first: ['first', 'second', 'third'], second: ['first', 'second', 'third'], third: ['first', 'second', 'third'] });
    const log = await events(id);
    expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status, e.data.content])).toEqual(
      expect.arrayContaining([
        ['first', 'ok', 'first done'],
        ['second', 'ok', 'second done'],
        ['third', 'ok', 'third done'],
      ]),
    );
    expect(log.at(-1)!.data).toMatchObject({ reason: 'completed' });
  });

  it('has a step the SDK retried after a provider error written once, its tool run once', async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'send' }], failFirst: true });
    let ran = 0;
    await serve(id, pool, [{ name: 'send', execute: () => `sent ${++ran}` }]);
    expect(ran).toBe(1);
    const log = await events(id);
    expect(log.filter((e) => e.type === 'step/start').map((e) => e.data.step)).toEqual([1, 2]);
    expect(log.filter((e) => e.type === 'model/message').map((e) => e.data.toolCalls.length)).toEqual([1, 0]);
    expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ status: 'ok', content: 'sent 1' });
    expect(log.at(-1)!.data).toMatchObject({ reason: 'completed' });
  });

  it("records a tool's output that is not JSON (a BigInt, a cycle) as a result saying the tool ran", async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'big_int' }, { name: 'cycle' }] });
    const ran: string[] = [];
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    await serve(id, pool, [
      { name: 'big_int', execute: () => (ran.push('big_int'), { n: 10n }) },
      { name: 'cycle', execute: () => (ran.push('cycle'), cyclic) },
    ]).catch(() => undefined);
    expect(ran.sort()).toEqual(['big_int', 'cycle']);
    const results = (await events(id)).filter((e) => e.type === 'tool/result');
    expect(results.map((e) => [e.data.name, e.data.status, e.synthetic])).toEqual(
      expect.arrayContaining([
        ['big_int', 'error', false],
        ['cycle', 'error', false],
      ]),
    );
    for (const r of results) expect(r.data.content).toMatch(/^the tool ran, but its output could not be recorded: it is not JSON/);
  });

  it("stores a tool's output holding a NUL or an unpaired surrogate, as forkline's own agent does (U+FFFD)", async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'read_binary' }] });
    await serve(id, pool, [{ name: 'read_binary', execute: () => 'PK\u0000\u0003 \ud800!' }]);
    const log = await events(id);
    expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ status: 'ok', content: 'PK\uFFFD\u0003 \uFFFD!' });
    expect(log.at(-1)!.data).toMatchObject({ reason: 'completed' });
  });

  it("records a tool's output over the runner's byte bound as a result saying so, and the turn goes on", async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'dump' }] });
    let ran = 0;
    // Bigger than the server takes in one request (17 MiB): unbounded, the result and the turn's end would be lost.
    await serve(id, pool, [{ name: 'dump', execute: () => (ran++, 'x'.repeat(18 * 1024 * 1024)) }]);
    expect(ran).toBe(1);
    const log = await events(id);
    const result = log.find((e) => e.type === 'tool/result')!;
    expect(result.data).toMatchObject({ status: 'error', name: 'dump' });
    expect(result.data.content).toBe(
      `the tool ran, but its output (${18 * 1024 * 1024} bytes) is over this runner's limit of 1000000 bytes (maxResultBytes), so it was not recorded`,
    );
    expect(log.at(-1)!.data).toMatchObject({ reason: 'completed' });
  });

  it('ends the turn failed when the batch with a result is refused (413), its call answered as one that may have run', async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'dump' }] });
    let ran = 0;
    // A runner whose maxResultBytes is over the server's body limit: the batch holding the result is refused.
    await serve(id, pool, [{ name: 'dump', execute: () => (ran++, 'x'.repeat(18 * 1024 * 1024)) }], { maxResultBytes: 20 * 1024 * 1024 }).catch(
      () => undefined,
    );
    expect(ran).toBe(1);
    const log = await events(id);
    expect(log.filter((e) => e.type === 'tool/result').map((e) => [e.data.status, e.synthetic])).toEqual([['error', false]]);
    expect(log.find((e) => e.type === 'tool/result')!.data.content).toMatch(/could not record this call's result .*the tool may have run/);
    expect(log.slice(-3).map((e) => [e.type, e.data.reason, e.synthetic])).toEqual([
      ['step/end', 'failed', false],
      ['plugin/agent/error', undefined, false],
      ['turn/end', 'failed', false],
    ]);
  });
});

describe.each(['stream', 'generate'] as const)('the AI SDK adapter (%s) cancelled by the app', (mode) => {
  it('runs no tool whose call is stored when the cancellation comes before it starts, and ends the turn failed', async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'send' }] });
    const cancel = new AbortController();
    let ran = 0;
    let stored: unknown[] = [];
    const model = createOpenAI({ apiKey: 'test', baseURL: providerUrl }).chat('fake-model');
    const tools = {
      send: aiTool({
        inputSchema: parameters,
        // The SDK has the call (so it is in the log) and is about to run it: the app stops now.
        onInputAvailable: async () => {
          stored = (await events(id)).filter((e) => e.type === 'model/message');
          cancel.abort(new Error('the app is stopping'));
        },
        execute: async () => ++ran,
      }),
    };
    const runner = new ForklineRunner({ url: app.url, pool });
    await runner.serve(id, (s) => runAiSdkTurns(s, { model, tools, mode, signal: cancel.signal }).then(() => {}));
    await runner.close();
    expect(stored).toHaveLength(1);
    expect(ran).toBe(0);
    const log = await events(id);
    expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ status: 'error', content: expect.stringMatching(/did not run/) });
    expect(log.at(-1)!.data).toMatchObject({ reason: 'failed' });
  });
});

describe('the AI SDK adapter with a tool that streams its output (an async generator)', () => {
  it('runs the tool, and records its last output as the result', async () => {
    const { id, pool } = await sessionWith({ calls: [{ name: 'progress' }] });
    let ran = 0;
    const model = createOpenAI({ apiKey: 'test', baseURL: providerUrl }).chat('fake-model');
    const tools = {
      progress: aiTool({
        inputSchema: parameters,
        async *execute() {
          ran++;
          yield 'working';
          yield 'finished';
        },
      }),
    };
    const runner = new ForklineRunner({ url: app.url, pool });
    await runner.serve(id, (s) => runAiSdkTurns(s, { model, tools }).then(() => {}));
    await runner.close();
    expect(ran).toBe(1);
    const log = await events(id);
    expect(log.find((e) => e.type === 'tool/result')!.data).toMatchObject({ status: 'ok', content: 'finished' });
    expect(log.at(-1)!.data).toMatchObject({ reason: 'completed' });
  });
});

describe('the AI SDK adapter with calls that fail', () => {
  it("stores each failed call's result as the text the SDK hands the model, not a wording of its own", async () => {
    const { id, pool } = await sessionWith({ calls: [] });
    const prompts: LanguageModelV3Prompt[] = [];
    const usage = {
      inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
      outputTokens: { total: 1, text: 1, reasoning: undefined },
    };
    const streamOf = (parts: LanguageModelV3StreamPart[]) =>
      new ReadableStream<LanguageModelV3StreamPart>({ start: (c) => (parts.forEach((p) => c.enqueue(p)), c.close()) });
    // The model calls a tool that throws, one with input its schema refuses, one the runner lacks and one with arguments
    // that are not JSON; then it answers.
    const model = new MockLanguageModelV3({
      doStream: async ({ prompt }) => {
        prompts.push(prompt);
        const called = prompt.some((m) => m.role === 'tool');
        const call = (toolCallId: string, toolName: string, input: unknown) => ({
          type: 'tool-call' as const,
          toolCallId,
          toolName,
          input: JSON.stringify(input),
        });
        return {
          stream: streamOf([
            { type: 'stream-start', warnings: [] },
            ...(called
              ? [
                  { type: 'text-start' as const, id: 't' },
                  { type: 'text-delta' as const, id: 't', delta: 'done' },
                  { type: 'text-end' as const, id: 't' },
                ]
              : [
                  call('c_throws', 'quota', { n: 1 }),
                  call('c_invalid', 'quota', { n: 'one' }),
                  call('c_missing', 'nope', {}),
                  // Arguments that are not JSON.
                  { ...call('c_unparsable', 'quota', {}), input: '{"n": ' },
                ]),
            { type: 'finish', finishReason: { unified: called ? 'stop' : 'tool-calls', raw: undefined }, usage },
          ]),
        };
      },
    });
    const tools = {
      quota: aiTool<{ n: number }, string>({
        inputSchema: parameters,
        execute: async (): Promise<string> => {
          throw new Error('quota exceeded for bob');
        },
      }),
    };
    const runner = new ForklineRunner({ url: app.url, pool });
    await runner.serve(id, (s) => runAiSdkTurns(s, { model, tools }).then(() => {}));
    await runner.close();
    // What the model was handed for each call in the step after it: the log's text as a request built from the log
    // renders it (ai 7's error-text, `Error: <message>`, would reach OpenAI wrapped as `{"error": …}`).
    const handed = new Map(
      prompts
        .at(-1)!
        .flatMap((m) => (m.role === 'tool' ? m.content : []))
        .flatMap((p) => (p.type === 'tool-result' ? [[p.toolCallId, p.output] as const] : [])),
    );
    const stored = new Map((await events(id)).filter((e) => e.type === 'tool/result').map((e) => [e.data.callId as string, e.data]));
    expect([...stored.keys()].sort()).toEqual(['c_invalid', 'c_missing', 'c_throws', 'c_unparsable']);
    for (const [callId, result] of stored) {
      expect(handed.get(callId)).toEqual({ type: 'text', value: `Error: ${result.content}` });
      expect(result.status).toBe('error');
    }
    // The error's message under either major (ai 7's own text is `Error: <message>`): no wording of the adapter's own.
    expect(stored.get('c_throws')!.content).toBe('quota exceeded for bob');
    expect(stored.get('c_invalid')!.content).toMatch(/Invalid input for tool quota: /);
    // A later request, built from the log (a fork's, the next turn's), holds the same text, marked as an error result the
    // way forkline's chat format marks every one (its own agent's too).
    const request = (await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { messages } } }`, { id })).session.modelRequest;
    const later = new Map((request.messages as any[]).filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content]));
    for (const [callId, result] of stored) expect(later.get(callId)).toBe(`Error: ${result.content}`);
  });
});
