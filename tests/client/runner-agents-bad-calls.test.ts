// Calls a model gets wrong, through @forkline/openai-agents with the Agents
// SDK's own packages (tool(), its OpenAI provider's Chat Completions and
// Responses models) against a fake provider (docs/runners.md): arguments that
// are not JSON, arguments the tool's schema refuses, a tool the agent does not
// have, and a tool asking a decision called with such arguments, resumed
// after the decision (the SDK's own: approve on its RunState and run it
// again). Each call is in the log before anything runs, once, under the id
// the model gave it; its result is what the SDK hands the model without
// forkline; and a fork of the session after it builds a request the provider
// takes. Before: a call whose arguments are not JSON was asked a person's
// decision though its tool asks none (the adapter handed the SDK a policy
// function of its own, and the SDK asks when it cannot evaluate one), and the
// parse error the SDK answers it with was never stored (the SDK answers it
// without the tool's `invoke`): a later claim's repair recorded the step's
// calls as interrupted, the approved one too. And in a run that also had a
// refused call (an id twice in one answer) or a call handed on under another
// id (its wire form), such a call was still asked a decision (the adapter's
// own policy function was handed on for the whole run): now the tool's own
// policy is, where it answers as the adapter's would.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Agent, OpenAIProvider, run, setTracingDisabled, tool, type Model } from '@openai/agents';
import { runAgentsTurns } from '@forkline/openai-agents';
import { agentsLookup, sentCallIds, useScriptedProvider, type Call } from '../helpers/call-id-sessions.ts';
import type { Provider } from '../helpers/provider-rules.ts';

const { held, session, send, serve, logOf, messages, results } = useScriptedProvider('agents-bad-calls');
beforeAll(() => setTracingDisabled(true));

const lookup = agentsLookup(held);

const BAD: Call[] = [
  { id: 'c_json', name: 'lookup', arguments: '{"key": "a"' },
  { id: 'c_schema', name: 'lookup', arguments: '{"key": 5}' },
];

/** Tool outputs as a request built from the log hands error results to the model (docs/runners.md): marked `Error: `. */
const marked = (texts: Record<string, string>) => Object.fromEntries(Object.entries(texts).map(([id, text]) => [id, `Error: ${text}`]));

/** The tool outputs a request hands the model, by call id. */
function handed(provider: Provider, body: any): Record<string, string> {
  const text = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));
  if (provider === 'openai-responses')
    return Object.fromEntries(body.input.filter((i: any) => i.type === 'function_call_output').map((i: any) => [i.call_id, text(i.output)]));
  return Object.fromEntries(body.messages.filter((m: any) => m.role === 'tool').map((m: any) => [m.tool_call_id, text(m.content)]));
}

describe.each(['openai', 'openai-responses'] as Provider[])('%s', (provider) => {
  let model: Model;
  beforeAll(async () => {
    model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: provider === 'openai-responses' }).getModel(
      'fake-model',
    );
  });
  const agent = () => new Agent({ name: 'looker', model, tools: [lookup] });

  it("records calls whose arguments are not JSON or fail the tool's schema once, as the model gave them, with what the SDK hands the model", async () => {
    // Without forkline: what the SDK hands the model for each.
    held.script = [BAD, 'answered'];
    const plain = await run(agent(), 'look up', { stream: true });
    for await (const _event of plain) void _event;
    await plain.completed;
    expect(plain.finalOutput).toBe('answered');
    const expected = handed(provider, held.fake.received.at(-1)!.body);
    expect(Object.keys(expected).sort()).toEqual(['c_json', 'c_schema']);

    held.ran = [];
    const s = await session('look up');
    held.script = [BAD, 'answered'];
    const from = held.fake.received.length;
    await serve(s, (session) => runAgentsTurns(session, agent()));
    const log = await logOf(s.id);
    expect(held.ran).toEqual([]);
    expect(messages(log)[0].toolCalls.map((c: Call) => [c.id, c.arguments])).toEqual(BAD.map((c) => [c.id, c.arguments]));
    // Each result is what the SDK handed the model (the parse error is stored before the model is handed it).
    const stored = results(log).sort((a, b) => a.callId.localeCompare(b.callId));
    expect(stored).toEqual(BAD.map((c) => ({ callId: c.id, status: 'error', content: expected[c.id] })));
    // A tool that asks no decision is asked none for a call whose arguments are not JSON, as without forkline.
    expect(log.some((e) => e.type === 'tool/approval-request')).toBe(false);
    expect(handed(provider, held.fake.received.at(-1)!.body)).toEqual(marked(expected));
    expect(held.fake.received.slice(from).map((r) => r.refusal)).toEqual([undefined, undefined]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    // A fork after the calls sends them with their results, once each, and the provider takes it.
    await expectForkServed(s, log.length - 1, ['c_json', 'c_schema'], provider, model);
  }, 60_000);

  it.each([
    [
      'a refused call (an id another call of the answer has)',
      [[{ id: 'c_ok', name: 'lookup', arguments: '{"key": "a"}' }, { id: 'c_ok', name: 'lookup', arguments: '{"key": "b"}' }, BAD[0]]],
    ],
    // An id of 100 characters, which providers refuse: the SDK is handed its wire form (docs/runners.md#call-ids).
    ['a call handed on under another id (its wire form)', [[{ id: `c_${'x'.repeat(98)}`, name: 'lookup', arguments: '{"key": "a"}' }], [BAD[0]]]],
  ] as Array<[string, Call[][]]>)(
    'answers a call whose arguments are not JSON with the parse error, asking no decision, in a run with %s',
    async (_what, answers) => {
      // Without forkline: what the SDK hands the model for the call.
      held.script = [[BAD[0]], 'answered'];
      const plain = await run(agent(), 'look up', { stream: true });
      for await (const _event of plain) void _event;
      await plain.completed;
      const parseError = handed(provider, held.fake.received.at(-1)!.body)['c_json'];
      expect(parseError).toMatch(/valid JSON/);

      const s = await session('look up');
      held.script = [...answers, 'answered'];
      held.ran = [];
      await serve(s, (session) => runAgentsTurns(session, agent()));
      const log = await logOf(s.id);
      expect(held.ran).toEqual(['a']);
      // As without forkline: the tool asks no decision, so the call is answered with the SDK's parse error, and stored so.
      expect(log.some((e) => e.type === 'tool/approval-request')).toBe(false);
      const bad = messages(log)
        .flatMap((m) => m.toolCalls)
        .at(-1);
      expect(bad.arguments).toBe(BAD[0].arguments);
      expect(results(log).find((r) => r.callId === bad.id)).toEqual({ callId: bad.id, status: 'error', content: parseError });
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
      // A fork after the calls sends them as the run's last request did (each once, in its wire form), and the provider takes it.
      await expectForkServed(s, log.length - 1, sentCallIds(provider, held.fake.received.at(-1)!.body), provider, model);
    },
    60_000,
  );

  it('stores what the SDK hands the model for a refused call (an id another call of the answer has) whose arguments are not JSON', async () => {
    const s = await session('look up');
    held.script = [
      [
        { id: 'c_ok', name: 'lookup', arguments: '{"key": "a"}' },
        { ...BAD[0], id: 'c_ok' },
      ],
      'answered',
    ];
    held.ran = [];
    await serve(s, (session) => runAgentsTurns(session, agent()));
    const log = await logOf(s.id);
    expect(held.ran).toEqual(['a']);
    expect(log.some((e) => e.type === 'tool/approval-request')).toBe(false);
    // Recorded under its position (docs/runners.md#call-ids); the SDK answers it with its parse error, and so does the log.
    const handedNow = handed(provider, held.fake.received.at(-1)!.body);
    expect(handedNow.call_2).toMatch(/^Error: .*valid JSON/s);
    expect(results(log).find((r) => r.callId === 'call_2')).toEqual({ callId: 'call_2', status: 'error', content: handedNow.call_2.slice('Error: '.length) });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    await expectForkServed(s, log.length - 1, sentCallIds(provider, held.fake.received.at(-1)!.body), provider, model);
  }, 60_000);

  it('records a call of a tool the agent does not have once, answered, and the turn ends saying so; a fork of it is a request the provider takes', async () => {
    const s = await session('look up');
    held.script = [[{ id: 'c_nope', name: 'nope', arguments: '{}' }], 'answered'];
    await serve(s, (session) => runAgentsTurns(session, agent()));
    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls.map((c: Call) => c.id)).toEqual(['c_nope']);
    // As without forkline, the SDK stops the run (its toolNotFoundBehavior 'raise_error'): the call is answered as not run.
    expect(results(log)).toEqual([{ callId: 'c_nope', status: 'error', content: expect.stringMatching(/did not run/) }]);
    expect(log.filter((e) => e.type === 'plugin/agent/error').map((e) => e.data.message)).toEqual(['Tool nope not found in agent looker.']);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'failed' } });
    await expectForkServed(s, log.length - 1, ['c_nope'], provider, model);
  }, 60_000);

  it('asks for a decision on a gated call with such arguments, and once approved answers it as the SDK resuming its RunState does', async () => {
    const gated = tool({
      name: 'wire',
      description: 'wires money',
      parameters: z.object({ key: z.string() }),
      needsApproval: true,
      execute: async ({ key }) => (held.ran.push(key), `wired ${key}`),
    });
    const calls: Call[] = [
      { id: 'c_json', name: 'wire', arguments: '{"key": "a"' },
      { id: 'c_schema', name: 'wire', arguments: '{"key": 5}' },
    ];
    const gatedAgent = () => new Agent({ name: 'wirer', model, tools: [gated] });

    // Without forkline: the run stops for the call it can parse (the other is answered with the parse error, as the
    // SDK answers a tool with a flag for its policy), the app approves it on its RunState and resumes it.
    held.script = [calls, 'answered'];
    const first = await run(gatedAgent(), 'wire', { stream: true });
    for await (const _event of first) void _event;
    await first.completed;
    expect(first.interruptions.map((i) => (i.rawItem as { callId: string }).callId)).toEqual(['c_schema']);
    for (const i of first.interruptions) first.state.approve(i);
    const resumed = await run(gatedAgent(), first.state, { stream: true });
    for await (const _event of resumed) void _event;
    await resumed.completed;
    expect(resumed.finalOutput).toBe('answered');
    const expected = handed(provider, held.fake.received.at(-1)!.body);

    held.ran = [];
    const s = await session('wire');
    held.script = [calls];
    await serve(s, (session) => runAgentsTurns(session, gatedAgent()));
    let log = await logOf(s.id);
    expect(log.filter((e) => e.type === 'tool/approval-request').map((e) => e.data.callId)).toEqual(['c_schema']);
    await held.app.ok(`mutation($id: ID!) { approveToolCall(input: {sessionId: $id, callId: "c_schema"}) { status } }`, { id: s.id });
    held.script = ['answered'];
    await serve(s, (session) => runAgentsTurns(session, gatedAgent()));
    log = await logOf(s.id);
    expect(held.ran).toEqual([]);
    const stored = results(log).sort((a, b) => a.callId.localeCompare(b.callId));
    expect(stored).toEqual(calls.map((c) => ({ callId: c.id, status: 'error', content: expected[c.id] })));
    // The run after the decision starts from forkline's request, which marks an error result's text (docs/runners.md).
    expect(handed(provider, held.fake.received.at(-1)!.body)).toEqual(marked(expected));
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    await expectForkServed(s, log.length - 1, ['c_json', 'c_schema'], provider, model);
  }, 60_000);
});

/** Forks `id` at `atSeq` onto a pool of its own, sends it a message and serves it: its request holds `ids`, each once, and the provider takes it. */
async function expectForkServed({ id, pool }: { id: string; pool: string }, atSeq: number, ids: string[], provider: Provider, model: Model) {
  // The child is served by the parent's runner pool.
  const r = await held.app.ok(`mutation($id: ID!, $at: Int!) { forkSession(input: { sessionId: $id, atSeq: $at }) { session { id } } }`, { id, at: atSeq });
  const child = r.forkSession.session.id as string;
  await send(child, 'go on');
  held.script = ['went on'];
  const from = held.fake.received.length;
  await serve({ id: child, pool }, (session) => runAgentsTurns(session, new Agent({ name: 'looker', model, tools: [lookup] })));
  const sent = held.fake.received.slice(from);
  expect(sent.map((r) => [r.refusal, sentCallIds(provider, r.body)])).toEqual([[undefined, ids]]);
  expect((await logOf(child)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
}
