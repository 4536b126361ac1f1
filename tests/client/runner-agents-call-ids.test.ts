// The OpenAI Agents adapter (@forkline/openai-agents) with call ids a model
// gives inside one run (docs/runners.md#call-ids), with the Agents SDK's own
// packages (@openai/agents: tool(), the OpenAI provider's Chat Completions and
// Responses models) against a fake provider that refuses what the real API
// refuses (tests/helpers/provider-rules.ts: an id over 40 / 64 characters, a
// Responses call id twice, a chat result for no call). The SDK sends a run's
// calls back to the model under the ids the model gave them, so a hostile or
// numbering model broke the turn: the log refused an answer holding an id
// twice, over 200 characters or with a NUL (the turn failed, the session's
// answer lost), and the next request of the run repeated an earlier call's id
// or sent one over the provider's limit (a 400). Now each call is recorded as
// forkline's own agent records it, and the SDK is handed its wire id:
// - two calls of one answer with one id: the first runs, the second is
//   recorded under `call_<position>` with an error result and never runs;
// - an id the log cannot hold (300 characters, a NUL): recorded under
//   `call_<position>`, answered with why, not run;
// - an id the log holds but providers refuse (100 characters): recorded as
//   given, run, and sent back under its wire form;
// - an id repeating an earlier step's call in the run, or the history's
//   (a server numbering calls per answer): runs under a fresh id, and no
//   request holds an id twice.
// And a run that ends at a tool (toolUseBehavior: 'stop_on_first_tool'):
// the SDK's final output is stored as the turn's answer, the last
// model/message, so `lastAnswer` and a fork see it.
import { beforeAll, describe, expect, it } from 'vitest';
import { Agent, OpenAIProvider, setTracingDisabled, type Model } from '@openai/agents';
import { ForklineRunner } from '@forkline/runner';
import { runAgentsTurns } from '@forkline/openai-agents';
import { agentsLookup, look, useScriptedProvider, type Call } from '../helpers/call-id-sessions.ts';
import type { Provider } from '../helpers/provider-rules.ts';

const { held, session, send, logOf, messages, results, requestIds, requestsSince } = useScriptedProvider('agents-call-ids');
beforeAll(() => setTracingDisabled(true));

const lookup = agentsLookup(held);

const modelOf = (provider: Provider): Model =>
  new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: provider === 'openai-responses' }).getModel(
    'fake-model',
  ) as unknown as Model;

async function serve(s: { id: string; pool: string }, provider: Provider, agent = new Agent({ name: 'looker', tools: [lookup] })) {
  const model = modelOf(provider);
  const runner = new ForklineRunner({ url: held.app.url, pool: s.pool });
  try {
    await runner.serve(s.id, (session) => runAgentsTurns(session, agent.clone({ model })).then(() => {}));
  } finally {
    await runner.close();
  }
}

describe.each(['openai', 'openai-responses'] as Provider[])('%s', (provider) => {
  it('runs the first of two calls an answer gives one id; the second is recorded under its position, answered, never run', async () => {
    const s = await session('look up a and b');
    const from = held.fake.received.length;
    held.script = [[look('call_1', 'a'), look('call_1', 'b')], 'done'];
    held.ran.length = 0;
    await serve(s, provider);

    expect(held.ran).toEqual(['a']);
    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls.map((c: Call) => c.id)).toEqual(['call_1', 'call_2']);
    expect(results(log)).toEqual([
      { callId: 'call_2', status: 'error', content: 'not run: the model gave it the id of another call of this step (call_1)' },
      { callId: 'call_1', status: 'ok', content: 'value of a' },
    ]);
    const requests = requestsSince(from);
    expect(requests).toEqual([
      { refusal: undefined, ids: [] },
      { refusal: undefined, ids: ['call_1', 'call_2'] },
    ]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it.each([
    ['of 300 characters', 'c'.repeat(300), 'not run: the model gave it an id of 300 characters (1-200 allowed)'],
    ['holding a NUL', 'call\u00001', 'not run: the model gave it an id holding a NUL character or an unpaired surrogate'],
  ])(
    'records a call whose id is %s under its position, answered with why: it never runs',
    async (_what, id, why) => {
      const s = await session('look up a');
      const from = held.fake.received.length;
      held.script = [[look(id, 'a')], 'done'];
      held.ran.length = 0;
      await serve(s, provider);

      expect(held.ran).toEqual([]);
      const log = await logOf(s.id);
      expect(messages(log)[0].toolCalls).toMatchObject([{ id: 'call_1', name: 'lookup' }]);
      expect(results(log)).toEqual([{ callId: 'call_1', status: 'error', content: why }]);
      expect(requestsSince(from)).toEqual([
        { refusal: undefined, ids: [] },
        { refusal: undefined, ids: ['call_1'] },
      ]);
      expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    },
    60_000,
  );

  it('records an id providers refuse (100 characters) as given, runs it, and sends it back under its wire form', async () => {
    const s = await session('look up a');
    const from = held.fake.received.length;
    const id = `call_${'x'.repeat(95)}`;
    held.script = [[look(id, 'a')], 'done'];
    held.ran.length = 0;
    await serve(s, provider);

    expect(held.ran).toEqual(['a']);
    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls).toMatchObject([{ id }]);
    expect(results(log)).toEqual([{ callId: id, status: 'ok', content: 'value of a' }]);
    const requests = requestsSince(from);
    expect(requests.map((r) => r.refusal)).toEqual([undefined, undefined]);
    const [sent] = requests[1].ids;
    expect(sent).toMatch(/^call_x+_[\w-]{16}$/);
    expect(sent).toHaveLength(40);
    // The form forkline sends in later requests (Session.modelRequest): the run's in-turn request sent the same.
    expect(await requestIds(s.id)).toEqual([sent]);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it("runs a call repeating an earlier step's id, or the history's, under a fresh id: no request holds an id twice", async () => {
    const s = await session('look up a, then b');
    const from = held.fake.received.length;
    // A server numbering calls per answer: every answer's first call is call_0.
    held.script = [[look('call_0', 'a')], [look('call_0', 'b')], 'done'];
    held.ran.length = 0;
    await serve(s, provider);
    await send(s.id, 'and c');
    held.script = [[look('call_0', 'c')], 'done'];
    await serve(s, provider);

    expect(held.ran).toEqual(['a', 'b', 'c']);
    const log = await logOf(s.id);
    const calls = messages(log).flatMap((m) => m.toolCalls.map((c: Call) => c.id));
    expect(calls).toEqual(['call_0', 'call_1', 'call_1_']);
    expect(results(log).map((r) => [r.callId, r.status])).toEqual([
      ['call_0', 'ok'],
      ['call_1', 'ok'],
      ['call_1_', 'ok'],
    ]);
    const requests = requestsSince(from);
    expect(requests.map((r) => r.refusal)).toEqual([undefined, undefined, undefined, undefined, undefined]);
    for (const r of requests) expect(new Set(r.ids).size).toBe(r.ids.length);
    expect(log.filter((e) => e.type === 'turn/end').map((e) => e.data.reason)).toEqual(['completed', 'completed']);
  }, 60_000);

  it("stores a run's final output as the turn's answer when the agent stops at its first tool", async () => {
    const s = await session('look up a');
    held.script = [[look('call_1', 'a')]];
    held.ran.length = 0;
    await serve(s, provider, new Agent({ name: 'stopper', tools: [lookup], toolUseBehavior: 'stop_on_first_tool' }));

    expect(held.ran).toEqual(['a']);
    const log = await logOf(s.id);
    expect(log.slice(-5).map((e) => e.type)).toEqual(['model/message', 'tool/result', 'model/message', 'step/end', 'turn/end']);
    expect(log.at(-3)!.data).toMatchObject({ turn: 1, step: 1, text: 'value of a', toolCalls: [] });
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    const answer = await held.app.ok(`query($id: ID!) { session(id: $id) { lastAnswer { text } } }`, { id: s.id });
    expect(answer.session.lastAnswer.text).toBe('value of a');
    // A fork after the turn continues from that answer.
    const request = await held.app.ok(`query($id: ID!) { session(id: $id) { modelRequest { messages } } }`, { id: s.id });
    expect((request.session.modelRequest.messages as any[]).at(-1)).toMatchObject({ role: 'assistant', content: 'value of a' });
  }, 60_000);
});
