// A user's cancelTurn reaching a turn an external runner runs with the real
// frameworks (the AI SDK on @ai-sdk/anthropic, the OpenAI Agents SDK on its
// chat model, against a fake provider speaking their wire formats), through
// the real server: the cancel ends the turn `cancelled` at once, as forkline's
// own agent ends one, and takes the lease, so the runner's next write answers
// LEASE_LOST: its work is aborted (RunnerSession.signal), the result its tool
// returns afterwards is not written, and the model is not asked again. The
// lease is long (60 s): no renewal is what stops the runner. Before, the cancel
// waited for the runner's next renewal, and the result and the model's next
// call went in meanwhile.
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAnthropic } from '@ai-sdk/anthropic';
import { tool as aiTool } from 'ai';
import { Agent, OpenAIProvider, setTracingDisabled, tool } from '@openai/agents';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { look, useScriptedProvider } from '../helpers/call-id-sessions.ts';
import { waitFor } from '../helpers/wait.ts';

const { held, session, logOf } = useScriptedProvider('user-cancel');
beforeAll(() => setTracingDisabled(true));

/** A tool that runs until the test lets it go (or its signal aborts), then answers; `runs`: how often it started. */
function gatedTool() {
  const seen = { runs: 0, go: () => {} };
  const gate = new Promise<void>((resolve) => (seen.go = resolve));
  const execute = async (signal: AbortSignal | undefined) => {
    seen.runs++;
    await Promise.race([gate, new Promise((resolve) => signal?.addEventListener('abort', resolve, { once: true }))]);
    return 'finished after all';
  };
  return { seen, execute };
}

/**
 * Serves `s` on a runner with a 60 s lease, cancels the turn through GraphQL while its tool runs, then lets the tool
 * answer: the runner's append of the result is what finds the turn cancelled.
 */
async function cancelWhileTheToolRuns(
  s: { id: string; pool: string },
  seen: { runs: number; go: () => void },
  work: (session: RunnerSession) => Promise<unknown>,
) {
  const runner = new ForklineRunner({ url: held.app.url, pool: s.pool, leaseMs: 60_000 });
  let signal: AbortSignal | undefined;
  try {
    const served = runner
      .serve(s.id, (session) => ((signal = session.signal), work(session).then(() => {})))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    await waitFor(() => seen.runs === 1, { what: 'the tool to start' });
    await held.app.ok(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id: s.id });
    seen.go();
    const ended = await served;
    expect(String(ended)).toMatch(/lease/i);
  } finally {
    await runner.close();
  }
  expect(signal?.aborted).toBe(true);
  expect(String(signal?.reason)).toMatch(/lease/i);
  expect(seen.runs).toBe(1); // the model was not asked again: no second call ran
  const log = await logOf(s.id);
  // The call is stored, unanswered (the tool's late answer was refused), and the turn ended as a user's cancel ends it.
  expect(log.filter((e) => e.type === 'tool/result')).toEqual([]);
  expect(log.filter((e) => e.type === 'model/message')).toHaveLength(1);
  expect(log.slice(-2)).toEqual([
    { type: 'step/end', data: expect.objectContaining({ reason: 'interrupted' }) },
    { type: 'turn/end', data: expect.objectContaining({ reason: 'cancelled' }) },
  ]);
  const row = (await held.app.ok(`query($id: ID!) { session(id: $id) { status runnerHolder } }`, { id: s.id })).session;
  expect(row).toEqual({ status: 'IDLE', runnerHolder: null });
}

describe.each(['stream', 'generate'] as const)("@forkline/ai-sdk (%s): a user's cancelTurn", (mode) => {
  it('ends the turn cancelled at once: the next append aborts the run', async () => {
    const s = await session('look up a');
    held.script = [[look('toolu_1', 'a')], [look('toolu_2', 'b')], 'done'];
    const { seen, execute } = gatedTool();
    const tools = {
      lookup: aiTool({ description: 'looks a key up', inputSchema: z.object({ key: z.string() }), execute: (_i, o) => execute(o.abortSignal) }),
    };
    const model = createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model');
    await cancelWhileTheToolRuns(s, seen, (session) => runAiSdkTurns(session, { model, tools, mode }));
  }, 60_000);
});

describe("@forkline/openai-agents: a user's cancelTurn", () => {
  it('ends the turn cancelled at once: the next append aborts the run', async () => {
    const model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: false }).getModel('fake-model');
    const s = await session('look up a');
    held.script = [[look('call_1', 'a')], [look('call_2', 'b')], 'done'];
    const { seen, execute } = gatedTool();
    const lookup = tool({
      name: 'lookup',
      description: 'looks a key up',
      parameters: z.object({ key: z.string() }),
      execute: (_i, _c, details) => execute(details?.signal),
    });
    await cancelWhileTheToolRuns(s, seen, (session) => runAgentsTurns(session, new Agent({ name: 'looker', model, tools: [lookup] })));
  }, 60_000);
});
