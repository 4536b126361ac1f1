// The OpenAI Agents SDK's own per-tool machinery through @forkline/openai-agents,
// with the real SDK (@openai/agents: tool(), its timeoutMs and tool guardrails)
// on the real OpenAI chat model talking to a fake Chat Completions provider,
// through the real server (docs/runners.md, "What a tool hands back"): what a
// call's result says in the log is what the SDK hands the model, and it never
// says a call that started did not run.
// - A tool past its `timeoutMs` ran (and may still run): its result says so,
//   the model reads that, and the tool's late return writes nothing.
// - A tool output guardrail that rejects the output: the log holds what the
//   model was given instead, never the output the guardrail kept from it (a
//   later turn and a fork are built from the log).
// - A tool input guardrail that rejects the call: the tool does not run, and
//   its result is the rejection the model read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  Agent,
  OpenAIProvider,
  ToolGuardrailFunctionOutputFactory,
  defineToolInputGuardrail,
  defineToolOutputGuardrail,
  setTracingDisabled,
  tool,
} from '@openai/agents';
import { ForklineRunner } from '@forkline/runner';
import { runAgentsTurns } from '@forkline/openai-agents';
import { MAX_STEP_CALLS } from '../../src/core/log-state.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { chatText, startChatProvider, type ChatAnswer, type ChatRequest } from '../helpers/chat-completions.ts';
import { setTimeout as sleep } from 'node:timers/promises';

let app: TestApp;
/** The tool messages each model request carried (what the model was given), by session input text. */
const seen = new Map<string, string[]>();
let callNo = 0;

/** The fake model: calls the tool the user's message names, then answers "done" once it has a result. */
function answer(body: ChatRequest): ChatAnswer {
  const lastUser = body.messages.map((m) => m.role).lastIndexOf('user');
  const asked = chatText(body.messages[lastUser].content);
  const results = body.messages.slice(lastUser).filter((m) => m.role === 'tool');
  if (results.length) {
    seen.set(
      asked,
      results.map((m) => chatText(m.content)),
    );
    return { text: 'done' };
  }
  // `many`: more calls in one answer than a step holds (MAX_STEP_CALLS + 1) of the tool `counted`.
  const [name, many] = asked === 'many' ? ['counted', MAX_STEP_CALLS + 1] : [asked, 1];
  const no = ++callNo;
  return { calls: Array.from({ length: many }, (_, i) => ({ id: `call_${no}_${i}`, name, arguments: '{"n":1}' })) };
}

let provider: Awaited<ReturnType<typeof startChatProvider>>;
let providerUrl = '';
beforeAll(async () => {
  setTracingDisabled(true);
  app = await startTestApp();
  provider = await startChatProvider(answer);
  providerUrl = provider.url;
});
afterAll(async () => {
  provider.close();
  await app.close();
});

const parameters = z.object({ n: z.number() });
/** What the tools did, by name: started, returned. */
const ran: string[] = [];
const SECRET = 'SECRET-4711';
const slow = (name: string) => async () => {
  ran.push(`${name} started`);
  await sleep(1500);
  ran.push(`${name} returned`);
  return 'sent';
};
const TOOLS = [
  tool({ name: 'slow_as_result', description: 'slow', parameters, timeoutMs: 150, execute: slow('slow_as_result') }),
  tool({ name: 'slow_raising', description: 'slow', parameters, timeoutMs: 150, timeoutBehavior: 'raise_exception', execute: slow('slow_raising') }),
  tool({
    name: 'leaky',
    description: 'returns a secret its guardrail keeps from the model',
    parameters,
    execute: async () => (ran.push('leaky started'), `the key is ${SECRET}`),
    outputGuardrails: [
      defineToolOutputGuardrail({
        name: 'no-secrets',
        run: async ({ output }) =>
          String(output).includes(SECRET)
            ? ToolGuardrailFunctionOutputFactory.rejectContent('[withheld: the output held a secret]')
            : ToolGuardrailFunctionOutputFactory.allow(),
      }),
    ],
  }),
  tool({ name: 'counted', description: 'counts its calls', parameters, execute: async () => (ran.push('counted started'), 'counted') }),
  tool({
    name: 'forbidden',
    description: 'a call its input guardrail rejects',
    parameters,
    execute: async () => (ran.push('forbidden started'), 'done it'),
    inputGuardrails: [
      defineToolInputGuardrail({ name: 'never', run: async () => ToolGuardrailFunctionOutputFactory.rejectContent('[refused: this call is not allowed]') }),
    ],
  }),
  // Tools that throw, answered by the SDK's default errorFunction and by one of the app's.
  tool({ name: 'failing', description: 'throws', parameters, execute: async () => (ran.push('failing started'), fail()) }),
  tool({
    name: 'failing_told',
    description: 'throws; its errorFunction tells the model why',
    parameters,
    execute: async () => (ran.push('failing_told started'), fail()),
    errorFunction: (_ctx, err) => `the tool failed: ${err instanceof Error ? err.message : String(err)}`,
  }),
];
function fail(): never {
  throw new Error('disk full at /var/spool');
}

const events = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: e.data as any }));
let sessionNo = 0;

describe.each([true, false])('@forkline/openai-agents (streamed: %s)', (stream) => {
  /** A session whose message names the tool to call, served once by a runner with the agent. */
  async function turnCalling(name: string) {
    const pool = `agents-tools-${++sessionNo}`;
    const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
    const text = `${name}`;
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
    seen.delete(text);
    const model = await new OpenAIProvider({ apiKey: 'test', baseURL: providerUrl, useResponses: false }).getModel('fake-model');
    const agent = new Agent({ name: 'tools', model, tools: TOOLS });
    const runner = new ForklineRunner({ url: app.url, pool });
    try {
      await runner.serve(id, (s) => runAgentsTurns(s, agent, { stream, maxTurns: 4 }).then(() => {}));
    } finally {
      await runner.close();
    }
    const log = await events(id);
    const result = log.find((e) => e.type === 'tool/result')?.data;
    return { id, log, result, modelRead: seen.get(text) };
  }

  it('records a call past its timeoutMs as one that ran and may still run, as the model read it; its late return writes nothing', async () => {
    ran.length = 0;
    const { id, log, result, modelRead } = await turnCalling('slow_as_result');
    expect(ran).toEqual(['slow_as_result started']);
    expect(result).toMatchObject({ status: 'error' });
    expect(result.content).toMatch(/timed out after 150 ?ms/i);
    expect(result.content).toMatch(/may (still be running|have run)/);
    expect(result.content).not.toMatch(/did not run/);
    // The model reads the result as a request built from the log hands it (an error's text marked `Error: `).
    expect(modelRead).toEqual([`Error: ${result.content}`]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    // The tool returns after the turn ended: nothing more is written.
    await sleep(1800);
    expect(ran).toEqual(['slow_as_result started', 'slow_as_result returned']);
    expect(await events(id)).toEqual(log);
  });

  it("ends the turn failed on a timeoutMs that raises, the call's result saying it may have run", async () => {
    ran.length = 0;
    const { id, log, result } = await turnCalling('slow_raising');
    expect(ran).toEqual(['slow_raising started']);
    expect(result).toMatchObject({ status: 'error' });
    expect(result.content).toMatch(/timed out after 150 ?ms/i);
    expect(result.content).not.toMatch(/did not run/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
    await sleep(1800);
    expect(await events(id)).toEqual(log);
  });

  it('never stores an output its output guardrail kept from the model: the log holds what the model read', async () => {
    ran.length = 0;
    const { id, log, result, modelRead } = await turnCalling('leaky');
    expect(ran).toEqual(['leaky started']);
    expect(JSON.stringify(log)).not.toContain(SECRET);
    expect(result.content).toBe('[withheld: the output held a secret]');
    expect(modelRead).toEqual([result.content]);
    // The next model request, built from the log (a later turn, a fork), does not hold it either.
    const request = await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { messages } } }`, { id });
    expect(JSON.stringify(request)).not.toContain(SECRET);
  });

  it('records a call its input guardrail rejected with the rejection the model read; the tool never runs', async () => {
    ran.length = 0;
    const { log, result, modelRead } = await turnCalling('forbidden');
    expect(ran).toEqual([]);
    expect(result).toMatchObject({ status: 'error', content: '[refused: this call is not allowed]' });
    expect(modelRead).toEqual([`Error: ${result.content}`]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it("records a tool that threw as an error, though the SDK's default errorFunction answers the model with a plain output", async () => {
    ran.length = 0;
    const { log, result, modelRead } = await turnCalling('failing');
    expect(ran).toEqual(['failing started']);
    // The log holds the SDK's errorFunction text, and the model reads it as a request built from the log hands it.
    expect(result).toMatchObject({ status: 'error', content: 'An error occurred while running the tool. Please try again.' });
    expect(modelRead).toEqual([`Error: ${result.content}`]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it("records a tool that threw as an error with its own errorFunction's text, the one the model read", async () => {
    ran.length = 0;
    const { result, modelRead } = await turnCalling('failing_told');
    expect(ran).toEqual(['failing_told started']);
    expect(modelRead).toEqual(['Error: the tool failed: disk full at /var/spool']);
    expect(result).toMatchObject({ status: 'error', content: 'the tool failed: disk full at /var/spool' });
  });

  it('runs none of the calls of an answer with more than a step holds: the message is refused, and the turn ends failed saying why', async () => {
    ran.length = 0;
    const { log } = await turnCalling('many');
    expect(ran).toEqual([]);
    expect(log.some((e) => e.type === 'model/message' && e.data.toolCalls.length > 0)).toBe(false);
    expect(log.find((e) => e.type === 'plugin/agent/error')?.data.message).toMatch(/step calls|4096/);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
  }, 60_000);
});
