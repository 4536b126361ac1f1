// A call whose arguments are not JSON, of a tool the session's approvalRequired
// names, through @forkline/ai-sdk with the AI SDK's own packages against a fake
// provider (docs/runners.md, "A call the model gets wrong"). The AI SDK alone,
// with the tool's `needsApproval: true`, asks no one for such a call: it answers
// it with its invalid-input error. So does the adapter: the call is stored,
// answered with that error, never run, and no decision is asked. Coverage only
// (held before); its Agents SDK counterpart is runner-agents-unparsed-approvals.
import { expect, it } from 'vitest';
import { z } from 'zod';
import { createOpenAI } from '@ai-sdk/openai';
import { streamText, stepCountIs, tool } from 'ai';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { useScriptedProvider, type Call } from '../helpers/call-id-sessions.ts';

const { held, send, serve, logOf, results } = useScriptedProvider('ai-sdk-unparsed');
const UNPARSED: Call = { id: 'c_json', name: 'lookup', arguments: '{"key": "a"' };
const lookup = (needsApproval?: boolean) =>
  tool({
    description: 'looks a key up',
    inputSchema: z.object({ key: z.string() }),
    needsApproval,
    execute: async ({ key }) => (held.ran.push(key), `value of ${key}`),
  });

it("answers a gated tool's call whose arguments are not JSON with the SDK's invalid-input error, asking no one, as the SDK does under needsApproval", async () => {
  const model = createOpenAI({ baseURL: `${held.fake.base}/openai/v1`, apiKey: 'sk' }).chat('fake-model');
  // Without forkline: the tool's own flag; the SDK answers the call with its error and asks no one.
  held.script = [[UNPARSED], 'answered'];
  const alone = streamText({ model, tools: { lookup: lookup(true) }, prompt: 'look up', stopWhen: stepCountIs(4) });
  await alone.consumeStream();
  const parts = (await alone.steps).flatMap((s) => s.content);
  expect(parts.some((p) => p.type === 'tool-approval-request')).toBe(false);
  const error = parts.find((p) => p.type === 'tool-error');
  expect(error).toBeDefined();

  const pool = 'ai-sdk-unparsed-gate';
  const created = await held.app.ok(`mutation($p: String!, $a: [String!]) { createSession(input: {runner: $p, approvalRequired: $a}) { id } }`, {
    p: pool,
    a: ['lookup'],
  });
  const s = { id: created.createSession.id as string, pool };
  await send(s.id, 'look up');
  held.script = [[UNPARSED], 'answered'];
  held.ran = [];
  await serve(s, (session) => runAiSdkTurns(session, { model, tools: { lookup: lookup() }, maxSteps: 4 }));
  const log = await logOf(s.id);
  expect(held.ran).toEqual([]);
  expect(log.some((e) => e.type === 'tool/approval-request')).toBe(false);
  // The log holds the SDK's error message; the model was handed it as a request built from the log renders it.
  const failure = (error as { error: unknown }).error;
  const content = failure instanceof Error ? failure.message : String(failure);
  expect(results(log)).toEqual([{ callId: 'c_json', status: 'error', content }]);
  const handed = held.fake.received.at(-1)!.body.messages.filter((m: { role: string }) => m.role === 'tool');
  expect(handed).toEqual([{ role: 'tool', tool_call_id: 'c_json', content: `Error: ${content}` }]);
  expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
}, 60_000);
