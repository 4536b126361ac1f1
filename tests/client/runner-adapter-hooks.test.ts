// The app's own hooks through the adapters (docs/runners.md, "The app's own
// hooks"), with the real frameworks against a fake provider speaking their
// wire formats, through the real server: an app that moves its agent onto
// forkline hears what it heard without forkline, and hears it after forkline
// recorded what it is told of.
// - @forkline/openai-agents ran a clone of the app's agent (agent.clone: a new
//   plain Agent built from its fields), so the listeners the app put on its
//   own agent (agent.on('agent_start' | 'agent_tool_start' | …)) never fired,
//   and what the app set on the agent after construction, or a subclass's
//   methods, were not there: the model got other instructions. The run now
//   goes on the app's agent itself (an object whose prototype it is), and each
//   event reaches the app's listeners with the app's agent, the app's own tool
//   and the call as the log holds it — the same events, in the same order, as
//   a run of the same agent without forkline.
// - @forkline/ai-sdk took none of the AI SDK's callbacks (onStepFinish,
//   onFinish, onChunk, experimental_onToolCallStart, …): an app's were never
//   called. They are now passed on, and each is called as streamText /
//   generateText without forkline calls it (a tool's start once its call is
//   stored).
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAnthropic } from '@ai-sdk/anthropic';
import { generateText, stepCountIs, streamText, tool as aiTool, type ModelMessage } from 'ai';
import { Agent, OpenAIProvider, run, setTracingDisabled, tool, type Model, type RunContext, type Tool } from '@openai/agents';
import { runAiSdkTurns, type AiSdkRunOptions } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { look, useScriptedProvider } from '../helpers/call-id-sessions.ts';

const { held, session, logOf, serve } = useScriptedProvider('adapter-hooks');
beforeAll(() => setTracingDisabled(true));

/** What the log holds of calls when read: the ids stored in model messages, and those with a result. */
async function callsIn(id: string) {
  const log = await logOf(id);
  return {
    stored: log.filter((e) => e.type === 'model/message').flatMap((e) => e.data.toolCalls.map((c: { id: string }) => c.id)) as string[],
    answered: log.filter((e) => e.type === 'tool/result').map((e) => e.data.callId as string),
  };
}

/** The log as read when each tool started (its listener's or callback's read): a tool returns once they are read. */
let logWhenStarted: Array<Promise<unknown>> = [];
const lookedUp = async (key: string) => (await Promise.all(logWhenStarted), `value of ${key}`);

/** What the log held when each of SCRIPT's tools started: its own call stored, its result not yet. */
const LOG_AT_EACH_START = [
  { callId: 'call_1', stored: ['call_1'], answered: [] },
  { callId: 'call_2', stored: ['call_1', 'call_2'], answered: ['call_1'] },
];

/** Two steps of one call each, then an answer. */
const SCRIPT = () => [[look('call_1', 'a')], [look('call_2', 'b')], 'answered'];

// Streamed runs (the adapter's default; the fake provider streams its Chat Completions answers): the events are the agent's either way.
describe('@forkline/openai-agents: the listeners on the app’s agent', () => {
  let model: Model;
  beforeAll(async () => {
    model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: false }).getModel('fake-model');
  });

  /** The app's agent, with the listeners an app puts on it: each writes what it heard to `heard`. */
  function listenedAgent(heard: string[], onToolStart: (callId: string) => void = () => {}) {
    const lookup = tool({
      name: 'lookup',
      description: 'looks a key up',
      parameters: z.object({ key: z.string() }),
      execute: ({ key }) => lookedUp(key),
    });
    const agent = new Agent({ name: 'looker', model, tools: [lookup] });
    const own = (t: Tool) => (t === lookup ? 'the app’s lookup' : `another tool "${t.name}"`);
    agent.on('agent_start', (_ctx, a) => heard.push(`agent_start: ${a === agent ? 'the app’s agent' : 'another agent'}`));
    agent.on('agent_tool_start', (_ctx, t, { toolCall }) => {
      const call = toolCall as { name: string; callId: string };
      heard.push(`agent_tool_start: ${own(t)}, ${call.name} ${call.callId}`);
      onToolStart(call.callId);
    });
    agent.on('agent_tool_end', (_ctx, t, result, { toolCall }) => {
      const call = toolCall as { name: string; callId: string };
      heard.push(`agent_tool_end: ${own(t)}, ${call.name} ${call.callId} → ${result}`);
    });
    agent.on('agent_end', (_ctx, output) => heard.push(`agent_end: ${output}`));
    return agent;
  }

  it('fire as in a run of the same agent without forkline, each tool event after its call is in the log', async () => {
    const without: string[] = [];
    held.script = SCRIPT();
    const result = await run(listenedAgent(without), 'look up a, then b', { stream: true });
    for await (const _event of result) void _event;
    await result.completed;
    expect(without).toEqual([
      'agent_start: the app’s agent',
      'agent_tool_start: the app’s lookup, lookup call_1',
      'agent_tool_end: the app’s lookup, lookup call_1 → value of a',
      'agent_tool_start: the app’s lookup, lookup call_2',
      'agent_tool_end: the app’s lookup, lookup call_2 → value of b',
      'agent_end: answered',
    ]);

    const s = await session('look up a, then b');
    const heard: string[] = [];
    logWhenStarted = [];
    const agent = listenedAgent(heard, (callId) => logWhenStarted.push(callsIn(s.id).then((calls) => ({ callId, ...calls }))));
    held.script = SCRIPT();
    await serve(s, (session) => runAgentsTurns(session, agent));

    expect(heard).toEqual(without);
    // The runner's events go through forkline first: a tool's start is heard once its call is stored (its result not yet).
    expect(await Promise.all(logWhenStarted)).toEqual(LOG_AT_EACH_START);
    expect((await logOf(s.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it('hand a call the log records under another id to the listeners under that id, as its tool sees it', async () => {
    const s = await session('look up a and b');
    const heard: string[] = [];
    held.script = [[look('call_0', 'a')], [look('call_0', 'b')], 'answered'];
    await serve(s, (session) => runAgentsTurns(session, listenedAgent(heard)));
    const starts = heard.filter((h) => h.startsWith('agent_tool_start'));
    expect(starts).toEqual(['agent_tool_start: the app’s lookup, lookup call_0', 'agent_tool_start: the app’s lookup, lookup call_1']);
    expect((await callsIn(s.id)).stored).toEqual(['call_0', 'call_1']);
  }, 60_000);

  it('run the app’s agent as the app left it: what it set after construction, and a subclass’s own methods', async () => {
    class Desk extends Agent {
      owner = 'nobody';
      override async getSystemPrompt(): Promise<string> {
        return `You keep the desk of ${this.owner}.`;
      }
    }
    const desk = new Desk({ name: 'desk', model });
    desk.owner = 'Ada';
    const plain = new Agent<{ tier?: string }>({ name: 'plain', model, instructions: (_ctx: RunContext<any>, a) => `Tier: ${(a as any).tier}.` });
    (plain as any).tier = 'gold';

    for (const [agent, instructions] of [
      [desk, 'You keep the desk of Ada.'],
      [plain, 'Tier: gold.'],
    ] as const) {
      const s = await session('hello');
      const from = held.fake.received.length;
      held.script = ['hi'];
      await serve(s, (session) => runAgentsTurns(session, agent as Agent<any, any>));
      expect(held.fake.received.slice(from).map((r) => r.body.messages[0])).toEqual([{ role: 'system', content: instructions }]);
      expect((await logOf(s.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    }
  }, 60_000);
});

describe.each(['stream', 'generate'] as const)('@forkline/ai-sdk (%s): the app’s own callbacks', (mode) => {
  const model = () => createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model');
  const tools = { lookup: aiTool({ description: 'looks a key up', inputSchema: z.object({ key: z.string() }), execute: ({ key }) => lookedUp(key) }) };

  /** The callbacks an app gives streamText / generateText: each writes what it heard to `heard`. */
  function callbacks(heard: string[], onToolStart: (callId: string) => void = () => {}) {
    return {
      experimental_onStart: () => void heard.push('start'),
      experimental_onStepStart: (e: { stepNumber: number }) => void heard.push(`step ${e.stepNumber} start`),
      experimental_onToolCallStart: (e: { toolCall: { toolName: string; toolCallId: string } }) => {
        heard.push(`tool call start: ${e.toolCall.toolName} ${e.toolCall.toolCallId}`);
        onToolStart(e.toolCall.toolCallId);
      },
      experimental_onToolCallFinish: (e: { toolCall: { toolCallId: string }; success: boolean; output?: unknown }) =>
        void heard.push(`tool call finish: ${e.toolCall.toolCallId} ${e.success ? e.output : 'failed'}`),
      onChunk: ({ chunk }: { chunk: { type: string; toolCallId?: string } }) =>
        void (chunk.type === 'tool-call' || chunk.type === 'tool-result' ? heard.push(`chunk ${chunk.type} ${chunk.toolCallId}`) : undefined),
      onStepFinish: (step: { finishReason: string; toolResults: Array<{ output: unknown }> }) =>
        void heard.push(`step finish: ${step.finishReason} [${step.toolResults.map((r) => r.output).join(', ')}]`),
      onFinish: (e: { text: string; steps: unknown[] }) => void heard.push(`finish: ${e.text} after ${e.steps.length} steps`),
    };
  }

  it('are called as streamText / generateText calls them without forkline, a tool’s start once its call is stored', async () => {
    const without: string[] = [];
    held.script = SCRIPT();
    const messages: ModelMessage[] = [{ role: 'user', content: 'look up a, then b' }];
    const plain = { model: model(), tools, messages, stopWhen: stepCountIs(16), ...callbacks(without) };
    if (mode === 'stream') await streamText(plain).consumeStream();
    else await generateText(plain);
    expect(without).toContain('finish: answered after 3 steps');
    expect(without.filter((h) => h.startsWith('tool call start'))).toEqual(['tool call start: lookup call_1', 'tool call start: lookup call_2']);

    const s = await session('look up a, then b');
    const heard: string[] = [];
    logWhenStarted = [];
    const hooks = callbacks(heard, (callId) => logWhenStarted.push(callsIn(s.id).then((calls) => ({ callId, ...calls }))));
    held.script = SCRIPT();
    await serve(s, (session) => runAiSdkTurns(session, { model: model(), tools, mode, ...(hooks as Partial<AiSdkRunOptions>) }));

    expect(heard).toEqual(without);
    // Through forkline first: a tool's start is heard once its call is stored (its result not yet).
    expect(await Promise.all(logWhenStarted)).toEqual(LOG_AT_EACH_START);
    expect((await logOf(s.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});
