// A call whose arguments are not JSON, of a tool a person decides on, through
// @forkline/openai-agents with the Agents SDK's own packages against a fake
// provider (docs/runners.md, "A call the model gets wrong"). The SDK answers
// such a call with its parse error, asking no one, when the tool's policy is a
// flag (`needsApproval: true`); it asks when the policy is a function of the
// arguments. A session's approvalRequired gates a tool as that flag does. Each
// is compared with the same run without forkline. Before: the adapter handed
// the SDK a policy function of its own for a gated tool, or for a flagged one
// in a run with a refused call, and the SDK asks a person for any call it
// cannot parse under a function: the call was sent for approval.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Agent, OpenAIProvider, run, setTracingDisabled, tool, type Model, type Tool } from '@openai/agents';
import { runAgentsTurns } from '@forkline/openai-agents';
import { agentsLookup, useScriptedProvider, type Call } from '../helpers/call-id-sessions.ts';
import type { Provider } from '../helpers/provider-rules.ts';

const { held, send, serve, logOf, results } = useScriptedProvider('agents-unparsed');
beforeAll(() => setTracingDisabled(true));

const UNPARSED: Call = { id: 'c_json', name: 'lookup', arguments: '{"key": "a"' };

/** A session of a runner pool of its own whose approvalRequired is `gated`, with a message waiting. */
let pools = 0;
async function sessionGating(gated: string[] | undefined, text: string) {
  const pool = `agents-unparsed-gate-${++pools}`;
  const r = await held.app.ok(`mutation($p: String!, $a: [String!]) { createSession(input: {runner: $p, approvalRequired: $a}) { id } }`, {
    p: pool,
    a: gated,
  });
  const id = r.createSession.id as string;
  await send(id, text);
  return { id, pool };
}

/** The tool outputs a request hands the model, by call id. */
function handed(provider: Provider, body: any): Record<string, string> {
  const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));
  if (provider === 'openai-responses')
    return Object.fromEntries(body.input.filter((i: any) => i.type === 'function_call_output').map((i: any) => [i.call_id, text(i.output)]));
  return Object.fromEntries(body.messages.filter((m: any) => m.role === 'tool').map((m: any) => [m.tool_call_id, text(m.content)]));
}

/** The `lookup` tool asking a decision by `needsApproval` (a flag or a function of the arguments); each key it runs goes to held.ran. */
const asking = (needsApproval: boolean | ((ctx: unknown, input: { key: string }) => Promise<boolean>)) =>
  tool({
    name: 'lookup',
    description: 'looks a key up',
    parameters: z.object({ key: z.string() }),
    needsApproval: needsApproval as never,
    execute: async ({ key }) => (held.ran.push(key), `value of ${key}`),
  });

describe.each(['openai', 'openai-responses'] as Provider[])('%s', (provider) => {
  let model: Model;
  beforeAll(async () => {
    model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: provider === 'openai-responses' }).getModel(
      'fake-model',
    );
  });
  const agentWith = (t: Tool) => new Agent({ name: 'looker', model, tools: [t] });

  /** Without forkline: the run of `t` on `script`, its interruptions' call ids and the tool outputs its last request handed the model. */
  async function plain(t: Tool, script: Array<Call[] | string>) {
    held.script = [...script];
    const r = await run(agentWith(t), 'look up', { stream: true });
    for await (const _event of r) void _event;
    await r.completed;
    return { asked: r.interruptions.map((i) => (i.rawItem as { callId: string }).callId), outputs: handed(provider, held.fake.received.at(-1)!.body) };
  }

  it("answers a call of a tool the session's approvalRequired names, whose arguments are not JSON, with the parse error, asking no one", async () => {
    // Without forkline, the tool's own flag: the SDK answers the call with its parse error and asks no one.
    const alone = await plain(asking(true), [[UNPARSED], 'answered']);
    expect(alone.asked).toEqual([]);
    expect(alone.outputs.c_json).toMatch(/valid JSON/);

    held.ran = [];
    const s = await sessionGating(['lookup'], 'look up');
    held.script = [[UNPARSED], 'answered'];
    await serve(s, (session) => runAgentsTurns(session, agentWith(agentsLookup(held))));
    const log = await logOf(s.id);
    expect(log.filter((e) => e.type === 'tool/approval-request')).toEqual([]);
    expect(results(log)).toEqual([{ callId: 'c_json', status: 'error', content: alone.outputs.c_json }]);
    // Handed as a request built from the log hands an error result (docs/runners.md): marked `Error: `.
    expect(handed(provider, held.fake.received.at(-1)!.body)).toEqual({ c_json: `Error: ${alone.outputs.c_json}` });
    expect(held.ran).toEqual([]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it("calls no tool's isEnabled for its approval probe: the app's code runs for the app's agent only", async () => {
    const asked: string[] = [];
    const lookup = tool({
      name: 'lookup',
      description: 'looks a key up',
      parameters: z.object({ key: z.string() }),
      isEnabled: async ({ agent }) => (asked.push(agent.name), true),
      execute: async ({ key }) => (held.ran.push(key), `value of ${key}`),
    });
    // A gated tool: the adapter learns how the SDK treats its policy (the probe) before the run.
    const s = await sessionGating(['lookup'], 'look up');
    held.script = [[UNPARSED], 'answered'];
    await serve(s, (session) => runAgentsTurns(session, agentWith(lookup)));
    expect((await logOf(s.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.filter((name) => name !== 'looker')).toEqual([]);
  }, 60_000);

  it("asks for the gated tool's other call and answers the unparsed one, in a run with a refused call, as the SDK does with the tool's flag", async () => {
    const ok: Call = { id: 'c_ok', name: 'lookup', arguments: '{"key": "a"}' };
    // Without forkline (ids of their own: the SDK alone does not refuse a repeated id): the call it can parse is asked, the other answered.
    const alone = await plain(asking(true), [[ok, UNPARSED]]);
    expect(alone.asked).toEqual(['c_ok']);

    for (const [gated, t] of [
      [['lookup'], agentsLookup(held)],
      [undefined, asking(true)],
    ] as Array<[string[] | undefined, Tool]>) {
      held.ran = [];
      const s = await sessionGating(gated, 'look up');
      // The second call repeats the first's id: recorded under its position and answered with its refusal, never run or asked.
      held.script = [[ok, { ...ok, arguments: '{"key": "b"}' }, UNPARSED]];
      await serve(s, (session) => runAgentsTurns(session, agentWith(t)));
      const log = await logOf(s.id);
      expect(log.filter((e) => e.type === 'tool/approval-request').map((e) => e.data.callId)).toEqual(['c_ok']);
      const stored = Object.fromEntries(results(log).map((r) => [r.callId, r]));
      expect(stored.c_json).toEqual({ callId: 'c_json', status: 'error', content: expect.stringMatching(/valid JSON/) });
      expect(stored.call_2).toMatchObject({ status: 'error' });
      expect(held.ran).toEqual([]);
    }
  }, 60_000);

  it('asks for a call whose arguments are not JSON when the policy is a function of the arguments, as the SDK does; the probe runs nothing', async () => {
    const seen: unknown[] = [];
    const byKey = async (_ctx: unknown, input: { key: string }) => (seen.push(input), input.key === 'b');
    // Without forkline: the SDK asks for the call it cannot parse (it cannot evaluate the function), and for key b.
    const alone = await plain(asking(byKey), [
      [{ id: 'c_a', name: 'lookup', arguments: '{"key": "a"}' }, { id: 'c_b', name: 'lookup', arguments: '{"key": "b"}' }, UNPARSED],
    ]);
    expect(alone.asked.sort()).toEqual(['c_b', 'c_json']);

    held.ran = [];
    seen.length = 0;
    const s = await sessionGating(undefined, 'look up');
    // A repeated id makes the adapter learn the tool's policy (its probe): the probe neither runs the tool nor asks the function.
    held.script = [
      [
        { id: 'c_a', name: 'lookup', arguments: '{"key": "a"}' },
        { id: 'c_a', name: 'lookup', arguments: '{"key": "c"}' },
        { id: 'c_b', name: 'lookup', arguments: '{"key": "b"}' },
        UNPARSED,
      ],
    ];
    const from = held.fake.received.length;
    await serve(s, (session) => runAgentsTurns(session, agentWith(asking(byKey))));
    const log = await logOf(s.id);
    expect(
      log
        .filter((e) => e.type === 'tool/approval-request')
        .map((e) => e.data.callId)
        .sort(),
    ).toEqual(['c_b', 'c_json']);
    expect(held.ran).toEqual(['a']);
    // The policy was asked about the calls the SDK could parse and did not refuse, as without forkline: never by the probe.
    expect(seen).toEqual(expect.arrayContaining([{ key: 'a' }, { key: 'b' }]));
    expect(seen).not.toContainEqual({});
    expect(held.fake.received.length - from).toBe(1);
  }, 60_000);
});
