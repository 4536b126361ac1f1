// The model settings an OpenAI Agents run sends through @forkline/openai-agents
// (docs/runners.md), with the Agents SDK's own packages (its OpenAI provider's
// Chat Completions and Responses models) against a fake provider: the
// provider's requests are read as it received them. The adapter built its
// running agent with the SDK's private `_modelSettingsExplicitlyConfigured`
// flag so that its settings were sent at all (the SDK sends an agent's own
// settings only when its constructor was given them); it now runs them
// through a `Runner` whose RunConfig.modelSettings they are, the SDK's public
// route. Either way:
// - the app's agent's own settings (temperature, max tokens, tool choice,
//   parallel tool calls) reach the provider as a run of the same agent
//   without forkline sends them, request by request (the SDK resets a named
//   tool choice after the tool ran);
// - a session's recorded settings go over the agent's, for an agent built
//   with settings and one built without: the provider gets what a run
//   without forkline of an agent built with those settings gets.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Agent, OpenAIProvider, run, setTracingDisabled, tool, type Model, type ModelSettings } from '@openai/agents';
import { runAgentsTurns } from '@forkline/openai-agents';
import { look, useScriptedProvider } from '../helpers/call-id-sessions.ts';
import type { Provider } from '../helpers/provider-rules.ts';

const { held, session, serve, logOf } = useScriptedProvider('agents-settings');
beforeAll(() => setTracingDisabled(true));

const lookup = tool({
  name: 'lookup',
  description: 'looks a key up',
  parameters: z.object({ key: z.string() }),
  execute: async ({ key }) => `value of ${key}`,
});

/** A call of lookup, then an answer. */
const SCRIPT = () => [[look('call_1', 'a')], 'answered'];

/** What a request sent besides its conversation: the settings, the tools, the tool choice, … */
const settingsOf = (body: Record<string, unknown>) => {
  const { messages: _m, input: _i, ...rest } = body;
  return rest;
};

describe.each(['openai', 'openai-responses'] as Provider[])('%s', (provider) => {
  let model: Model;
  beforeAll(async () => {
    model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: provider === 'openai-responses' }).getModel(
      'fake-model',
    );
  });
  const agentWith = (modelSettings?: ModelSettings) => new Agent({ name: 'looker', model, tools: [lookup], ...(modelSettings ? { modelSettings } : {}) });

  /** The settings of each request a run of `agent` without forkline sends. */
  async function withoutForkline(agent: Agent): Promise<unknown[]> {
    const from = held.fake.received.length;
    held.script = SCRIPT();
    const result = await run(agent, 'look up a', { stream: true });
    for await (const _event of result) void _event;
    await result.completed;
    return held.fake.received.slice(from).map((r) => settingsOf(r.body));
  }

  /** The settings of each request a forkline turn of `agent` sends, on a session recording `settings` (none: naming no model). */
  async function throughForkline(agent: Agent, settings?: Record<string, unknown>): Promise<unknown[]> {
    const s = await session('look up a');
    if (settings)
      await held.app.ok(`mutation($id: ID!, $m: ModelConfigInput!) { setSessionModel(sessionId: $id, model: $m) { id } }`, {
        id: s.id,
        m: { provider: 'openai', model: 'fake-model', settings },
      });
    const from = held.fake.received.length;
    held.script = SCRIPT();
    await serve(s, (session) => runAgentsTurns(session, agent, { resolveModel: () => model }));
    expect((await logOf(s.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    return held.fake.received.slice(from).map((r) => settingsOf(r.body));
  }

  it("sends the app's agent's own settings as a run of it without forkline sends them", async () => {
    const own: ModelSettings = { temperature: 0.25, topP: 0.5, maxTokens: 77, toolChoice: 'lookup', parallelToolCalls: false };
    const expected = await withoutForkline(agentWith(own));
    // They are the agent's settings (the named tool choice reset once the tool ran, as the SDK does).
    expect(expected[0]).toMatchObject({ temperature: 0.25, top_p: 0.5, parallel_tool_calls: false });
    expect(JSON.stringify(expected[0])).toContain('"lookup"');
    expect(expected).toHaveLength(2);

    expect(await throughForkline(agentWith(own))).toEqual(expected);
  }, 60_000);

  it("sends the session's recorded settings over the agent's, for an agent built with settings and one built without", async () => {
    const session = { temperature: 0.1, top_p: 0.9, max_tokens: 42, presence_penalty: 0.5, frequency_penalty: -0.5 };
    const mapped: ModelSettings = { temperature: 0.1, topP: 0.9, maxTokens: 42, presencePenalty: 0.5, frequencyPenalty: -0.5 };
    const own: ModelSettings = { temperature: 0.7, maxTokens: 500, toolChoice: 'required', parallelToolCalls: false };

    // An agent built without settings: the session's are all the run has.
    const bare = await withoutForkline(agentWith(mapped));
    expect(bare[0]).toMatchObject({ temperature: 0.1, top_p: 0.9 });
    expect(await throughForkline(agentWith(), session)).toEqual(bare);

    // An agent built with settings: the session's go over them, the rest stay the agent's.
    const over = await withoutForkline(agentWith({ ...own, ...mapped }));
    expect(over[0]).toMatchObject({ temperature: 0.1, parallel_tool_calls: false });
    expect(await throughForkline(agentWith(own), session)).toEqual(over);
  }, 60_000);
});
