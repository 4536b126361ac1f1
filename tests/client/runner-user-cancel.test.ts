// A user's cancelTurn reaching a turn an external runner runs with the real
// frameworks (the AI SDK on @ai-sdk/anthropic, the OpenAI Agents SDK on its
// chat model, against a fake provider speaking their wire formats), through
// the real server: the runner's next lease renewal ends the turn `cancelled`
// as forkline's own agent ends one, and answers LEASE_LOST, so the runner's
// work is aborted (the tool's signal fires) and the result the tool returns
// afterwards is not written. Before, the cancel was announced to forkline's
// own processes only: the runner's turn ran on to its end.
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

/** A tool that runs until its signal aborts (or 60 s), then answers. */
function hangingTool() {
  const seen = { started: false, aborted: false };
  const execute = async (signal: AbortSignal | undefined) => {
    seen.started = true;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 60_000);
      signal?.addEventListener('abort', () => (clearTimeout(t), (seen.aborted = true), resolve()), { once: true });
    });
    return 'finished after all';
  };
  return { seen, execute };
}

/** Serves `s` on a runner renewing every 300 ms, and cancels the turn through GraphQL once its tool runs. */
async function cancelWhileTheToolRuns(s: { id: string; pool: string }, seen: { started: boolean }, work: (session: RunnerSession) => Promise<unknown>) {
  const runner = new ForklineRunner({ url: held.app.url, pool: s.pool, leaseMs: 900 });
  try {
    const served = runner
      .serve(s.id, (session) => work(session).then(() => {}))
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    await waitFor(() => seen.started, { what: 'the tool to start' });
    await held.app.ok(`mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }`, { id: s.id });
    const ended = await served;
    expect(String(ended)).toMatch(/lease/i);
  } finally {
    await runner.close();
  }
  const log = await logOf(s.id);
  // The call is stored, unanswered (the tool's late answer was refused), and the turn ended as a user's cancel ends it.
  expect(log.filter((e) => e.type === 'tool/result')).toEqual([]);
  expect(log.slice(-2)).toEqual([
    { type: 'step/end', data: expect.objectContaining({ reason: 'interrupted' }) },
    { type: 'turn/end', data: expect.objectContaining({ reason: 'cancelled' }) },
  ]);
  const row = (await held.app.ok(`query($id: ID!) { session(id: $id) { status runnerHolder } }`, { id: s.id })).session;
  expect(row).toEqual({ status: 'IDLE', runnerHolder: null });
}

describe.each(['stream', 'generate'] as const)("@forkline/ai-sdk (%s): a user's cancelTurn", (mode) => {
  it('ends the turn cancelled and aborts the tool', async () => {
    const s = await session('look up a');
    held.script = [[look('toolu_1', 'a')], 'done'];
    const { seen, execute } = hangingTool();
    const tools = {
      lookup: aiTool({ description: 'looks a key up', inputSchema: z.object({ key: z.string() }), execute: (_i, o) => execute(o.abortSignal) }),
    };
    const model = createAnthropic({ baseURL: `${held.fake.base}/anthropic/v1`, apiKey: 'sk' })('fake-model');
    await cancelWhileTheToolRuns(s, seen, (session) => runAiSdkTurns(session, { model, tools, mode }));
    expect(seen.aborted).toBe(true);
  }, 60_000);
});

describe("@forkline/openai-agents: a user's cancelTurn", () => {
  it('ends the turn cancelled', async () => {
    const model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${held.fake.base}/openai/v1`, useResponses: false }).getModel('fake-model');
    const s = await session('look up a');
    held.script = [[look('call_1', 'a')], 'done'];
    const { seen, execute } = hangingTool();
    const lookup = tool({
      name: 'lookup',
      description: 'looks a key up',
      parameters: z.object({ key: z.string() }),
      execute: (_i, _c, details) => execute(details?.signal),
    });
    await cancelWhileTheToolRuns(s, seen, (session) => runAgentsTurns(session, new Agent({ name: 'looker', model, tools: [lookup] })));
  }, 60_000);
});
