// The app cancelling a turn (the adapters' `signal`, docs/runners.md
// "Cancelling") at the points between a call and its tool, with the real
// frameworks — the OpenAI Agents SDK's streamed run on its OpenAI chat model,
// the AI SDK's streamText / generateText on @ai-sdk/anthropic — against a
// fake provider speaking their wire formats, through the real server:
// - after the call's append, before its tool starts: the Agents SDK stops
//   without invoking the tool and its streamed run ends without an error, so
//   the old adapter recorded the turn `completed`, the call answered only "the
//   runner recorded no result for this call"; now the call says it did not
//   run because the run was cancelled, and the turn fails;
// - while the step's tools run (parallel calls, one of them cancelling): both
//   frameworks wait for the tools they started, whose results are stored as
//   they returned (ai 7's streamText does not wait: such a call's result says
//   the tool may have run and may still run); the Agents adapter recorded the
//   turn `completed` with no answer, and the AI SDK adapter's streamed turn
//   failed saying "stopped after 16 steps" after one. Now the turn fails with
//   the cancellation's reason.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAnthropic } from '@ai-sdk/anthropic';
import { tool as aiTool } from 'ai';
import { Agent, OpenAIProvider, setTracingDisabled, tool, type Model } from '@openai/agents';
import type { RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { look, useScriptedProvider } from '../helpers/call-id-sessions.ts';

const { held, session, logOf, results, serve } = useScriptedProvider('adapter-cancel');
beforeAll(() => setTracingDisabled(true));

/** The session with `cancel` fired right after the append that stores a call (its answer stored, its tool not started). */
function cancellingAfterTheCall(session: RunnerSession, cancel: AbortController): RunnerSession {
  const append = session.append.bind(session);
  session.append = async (events) => {
    const answered = await append(events);
    if (events.some((e) => e.type === 'model/message' && (e.data as { toolCalls: unknown[] }).toolCalls.length > 0))
      cancel.abort(new Error('the app is stopping'));
    return answered;
  };
  return session;
}

/** A lookup whose call of key `a` cancels the run 100 ms into its 400 ms; both keys' tools run to their end. */
function slowLookup(cancel: AbortController) {
  const ended: string[] = [];
  const execute = async ({ key }: { key: string }) => {
    if (key === 'a') setTimeout(() => cancel.abort(new Error('the app is stopping')), 100);
    await new Promise((r) => setTimeout(r, 400));
    ended.push(key);
    return `value of ${key}`;
  };
  return { ended, execute };
}

/** What a cancelled turn's log ends with: the turn failed, the cancellation's reason as its error. */
async function expectFailedByCancel(id: string) {
  const log = await logOf(id);
  expect(log.slice(-3)).toEqual([
    { type: 'step/end', data: expect.anything() },
    { type: 'plugin/agent/error', data: expect.objectContaining({ message: 'the app is stopping' }) },
    { type: 'turn/end', data: expect.objectContaining({ reason: 'failed' }) },
  ]);
  return log;
}

describe('@forkline/openai-agents cancelled by the app', () => {
  let model: Model;
  beforeAll(async () => {
    model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: false }).getModel('fake-model');
  });

  it('between the append of a call and its tool: the tool never runs, its result says why, and the turn fails', async () => {
    const s = await session('look up a');
    held.script = [[look('call_1', 'a')], 'done'];
    let ran = 0;
    const lookup = tool({ name: 'lookup', description: 'looks a key up', parameters: z.object({ key: z.string() }), execute: async () => `${ran++}` });
    const cancel = new AbortController();
    await serve(s, (session) =>
      runAgentsTurns(cancellingAfterTheCall(session, cancel), new Agent({ name: 'looker', model, tools: [lookup] }), { signal: cancel.signal }),
    );

    expect(ran).toBe(0);
    const log = await expectFailedByCancel(s.id);
    expect(results(log)).toEqual([
      { callId: 'call_1', status: 'error', content: 'the call did not run: the run was cancelled before it started (the app is stopping)' },
    ]);
  }, 60_000);

  it('while the step’s tools run: both run to their end, their results are stored, and the turn fails', async () => {
    const s = await session('look up a and b');
    held.script = [[look('call_1', 'a'), look('call_2', 'b')], 'done'];
    const cancel = new AbortController();
    const { ended, execute } = slowLookup(cancel);
    const lookup = tool({ name: 'lookup', description: 'looks a key up', parameters: z.object({ key: z.string() }), execute });
    await serve(s, (session) => runAgentsTurns(session, new Agent({ name: 'looker', model, tools: [lookup] }), { signal: cancel.signal }));

    expect(ended.sort()).toEqual(['a', 'b']);
    const log = await expectFailedByCancel(s.id);
    expect(results(log).map((r) => [r.callId, r.status, r.content])).toEqual([
      ['call_1', 'ok', 'value of a'],
      ['call_2', 'ok', 'value of b'],
    ]);
  }, 60_000);
});

describe.each(['stream', 'generate'] as const)('@forkline/ai-sdk (%s) cancelled by the app', (mode) => {
  // ai 6 waits for the tools it started; ai 7's streamText does not (ai-sdk-v7.test.ts runs this file on it).
  it('while the step’s tools run: each result is its output, or says it may still run; the turn fails saying why', async () => {
    const s = await session('look up a and b');
    held.script = [[look('toolu_1', 'a'), look('toolu_2', 'b')], 'done'];
    const cancel = new AbortController();
    const { ended, execute } = slowLookup(cancel);
    const tools = { lookup: aiTool({ description: 'looks a key up', inputSchema: z.object({ key: z.string() }), execute }) };
    const model = createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model');
    await serve(s, (session) => runAiSdkTurns(session, { model, tools, mode, signal: cancel.signal }));

    const log = await expectFailedByCancel(s.id);
    const running = 'the run was cancelled (the app is stopping) while the tool ran: it may have run, and may still be running: its effect is unknown.';
    expect(results(log).map((r) => [r.callId, r.status, r.content])).toEqual(
      ['a', 'b'].map((key, i) => (ended.includes(key) ? [`toolu_${i + 1}`, 'ok', `value of ${key}`] : [`toolu_${i + 1}`, 'error', running])),
    );
  }, 60_000);
});

describe.each(['stream', 'generate'] as const)('@forkline/ai-sdk (%s) cancelled while a tool streams its output', (mode) => {
  // streamText stops reading a tool's output stream when the run is cancelled, and the tool goes on: the old adapter
  // recorded it as one it "did not run", so a fork would think it safe to run again.
  it('never records the tool as one that did not run', async () => {
    const s = await session('look up a');
    held.script = [[look('toolu_1', 'a')], 'done'];
    const cancel = new AbortController();
    const seen: string[] = [];
    const tools = {
      lookup: aiTool({
        description: 'looks a key up',
        inputSchema: z.object({ key: z.string() }),
        async *execute({ key }) {
          yield 'looking';
          seen.push('started');
          cancel.abort(new Error('the app is stopping'));
          await new Promise((r) => setTimeout(r, 200));
          yield `value of ${key}`;
          seen.push('ended');
        },
      }),
    };
    const model = createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model');
    await serve(s, (session) => runAiSdkTurns(session, { model, tools, mode, signal: cancel.signal }));

    expect(seen[0]).toBe('started');
    const log = await expectFailedByCancel(s.id);
    const [result] = results(log);
    expect(result.callId).toBe('toolu_1');
    // Its output as it returned, when the SDK waited for it; else that it may have run and may still run.
    expect(result.content).toMatch(/^(value of a|the run was cancelled \(the app is stopping\) while the tool ran: it may have run, and may still be running)/);
  }, 60_000);
});
