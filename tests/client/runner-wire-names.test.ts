// An external runner continuing a session whose history calls a tool named
// as no provider takes it (`files.read v2`, from a recording), through the AI
// SDK adapter (@forkline/ai-sdk) and the AI SDK's own provider packages, to a
// fake server refusing what the real API refuses (tests/helpers/provider-rules.ts),
// in each of the four wire formats forkline speaks (docs/runners.md#wire-names).
// The runner runs that tool itself: it is offered, and the history's call is
// shown, under the form forkline's own agent sends (ModelRequest.wireToolNames);
// the model's call of it is recorded under the tool's own name and run by it;
// so too in a new session, whose runner's declaration would otherwise go with
// its first batch, after the request that lacks the tool's form.
// The OpenAI Agents adapter sends the same history under the same forms.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { tool, type ToolSet } from 'ai';
import { Agent, OpenAIProvider, setTracingDisabled } from '@openai/agents';
import { ForklineRunner } from '@forkline/runner';
import { aiSdkToolDeclarations, runAiSdkTurns, type AiSdkModel } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { answers, refusingProviders, toolsOffered, wireRefusal, type Provider } from '../helpers/provider-rules.ts';
import { agentsResponseText, recordingCalling } from '../helpers/wire-name-sessions.ts';

const TOOL = 'files.read v2';
const WIRE_TOOL = `files_read_v2_${createHash('sha256').update(TOOL).digest('base64url').slice(0, 16)}`;

const read: string[] = [];
/** The runner's own tools: the history's `files.read v2`, and one whose name every provider takes. */
const tools: ToolSet = {
  [TOOL]: tool({
    description: 'reads a file',
    inputSchema: z.object({ path: z.string() }),
    execute: async ({ path }) => (read.push(path), `contents of ${path}`),
  }),
  lookup: tool({ description: 'looks up a word', inputSchema: z.object({ word: z.string() }), execute: async ({ word }) => word }),
};

let app: TestApp;
let fake: Awaited<ReturnType<typeof refusingProviders>>;
let received: typeof fake.received;
let base = '';
/** What the fake model answers a request with: its SSE events. */
let answer: (provider: Provider, body: any) => string[];

const models: Record<Provider, () => AiSdkModel> = {
  openai: () => createOpenAI({ baseURL: `${base}/openai/v1`, apiKey: 'sk' }).chat('fake-model'),
  'openai-responses': () => createOpenAI({ baseURL: `${base}/openai/v1`, apiKey: 'sk' }).responses('fake-model'),
  anthropic: () => createAnthropic({ baseURL: `${base}/anthropic/v1`, apiKey: 'sk' })('fake-model'),
  google: () => createGoogleGenerativeAI({ baseURL: `${base}/google/v1beta`, apiKey: 'sk' })('fake-model'),
};

beforeAll(async () => {
  setTracingDisabled(true);
  fake = await refusingProviders((provider, body) => answer(provider, body));
  ({ base, received } = fake);
  app = await startTestApp();
}, 60_000);

afterAll(async () => {
  await app?.close();
  await fake?.close();
});

/** A session imported from the recording for `pool`, with a second message waiting. */
async function imported(pool: string, provider: Provider): Promise<string> {
  const declared = await aiSdkToolDeclarations(tools);
  const r = recordingCalling({ id: `ses_${pool}`, pool, tool: TOOL, provider, declared });
  const id = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r })).importRecording.id as string;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'read b' } });
  return id;
}

async function serve(id: string, pool: string, work: Parameters<ForklineRunner['serve']>[1]) {
  const runner = new ForklineRunner({ url: app.url, pool });
  try {
    await runner.serve(id, work);
  } finally {
    await runner.close();
  }
}

describe.each(Object.keys(wireRefusal) as Provider[])('%s through the AI SDK adapter', (provider) => {
  it("sends the history's call and offers the tool under its wire name, and records the model's call under the tool's own", async () => {
    const pool = `wire-${provider.replace(/\W/g, '')}`;
    const id = await imported(pool, provider);
    let offered: Array<[string, string]> = [];
    const from = received.length;
    answer = (p, body) => {
      if (received.slice(from).filter((r) => !r.refusal).length > 1) return answers[p].text('done');
      offered = toolsOffered[p](body);
      const name = offered.find(([, d]) => d === 'reads a file')?.[0] ?? 'missing';
      return answers[p].call({ id: 'call_2', name, arguments: '{"path":"b"}' });
    };
    read.length = 0;
    await serve(id, pool, (s) => runAiSdkTurns(s, { resolveModel: () => models[provider](), tools }).then(() => {}));

    const sent = received.slice(from);
    expect(sent.map((r) => r.refusal)).toEqual([undefined, undefined]);
    // On the wire: the tool's wire form, never its own name; the other tool by its own.
    expect(offered.map(([n]) => n).sort()).toEqual([WIRE_TOOL, 'lookup'].sort());
    for (const { body } of sent) {
      expect(JSON.stringify(body)).not.toContain(TOOL);
      expect(JSON.stringify(body)).toContain(WIRE_TOOL);
    }
    // In the log: the call under the tool's own name, run by the runner's tool.
    expect(read).toEqual(['b']);
    const events = await app.services.store.log.page(id, -1, 1000);
    const message = events.filter((e) => e.type === 'model/message' && anyData(e).turn === 2)[0];
    const [call] = anyData(message).toolCalls;
    expect(call).toMatchObject({ name: TOOL, arguments: '{"path":"b"}', effect: 'side-effects' });
    const result = events.find((e) => e.type === 'tool/result' && anyData(e).callId === call.id)!;
    expect(anyData(result)).toMatchObject({ status: 'ok', content: 'contents of b' });
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  }, 60_000);

  it('offers such a tool under its wire name in a new session too, before its declaration would go with the first batch', async () => {
    const pool = `fresh-${provider.replace(/\W/g, '')}`;
    const id = (await app.ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'read c' } });
    const from = received.length;
    answer = (p, body) => {
      if (received.slice(from).filter((r) => !r.refusal).length > 1) return answers[p].text('done');
      const name = toolsOffered[p](body).find(([, d]) => d === 'reads a file')?.[0] ?? 'missing';
      return answers[p].call({ id: 'call_3', name, arguments: '{"path":"c"}' });
    };
    read.length = 0;
    await serve(id, pool, (s) => runAiSdkTurns(s, { model: models[provider](), tools }).then(() => {}));

    const sent = received.slice(from);
    expect(sent.map((r) => r.refusal)).toEqual([undefined, undefined]);
    expect(toolsOffered[provider](sent[0].body).map(([n]) => n)).toContain(WIRE_TOOL);
    expect(read).toEqual(['c']);
    const events = await app.services.store.log.page(id, -1, 1000);
    expect(anyData(events.find((e) => e.type === 'model/message')!).toolCalls).toMatchObject([{ name: TOOL }]);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } });
  }, 60_000);
});

describe('the OpenAI Agents adapter', () => {
  it.each([false, true])(
    "sends the history's call under its wire name (Responses API: %s)",
    async (useResponses) => {
      const provider: Provider = useResponses ? 'openai-responses' : 'openai';
      const pool = `wire-agents-${provider.replace(/\W/g, '')}`;
      const id = await imported(pool, provider);
      // The Agents SDK reads a Responses answer from its completed response: the output goes with it.
      answer = (p) => (p === 'openai' ? answers[p].text('done') : agentsResponseText('done'));
      const from = received.length;
      const model = await new OpenAIProvider({ apiKey: 'sk', baseURL: `${base}/openai/v1`, useResponses }).getModel('fake-model');
      await serve(id, pool, (s) => runAgentsTurns(s, new Agent({ name: 'reader', model }), { resolveModel: () => model }).then(() => {}));

      const sent = received.slice(from);
      expect(sent.map((r) => r.refusal)).toEqual([undefined]);
      expect(JSON.stringify(sent[0].body)).not.toContain(TOOL);
      expect(JSON.stringify(sent[0].body)).toContain(WIRE_TOOL);
      const events = await app.services.store.log.page(id, -1, 1000);
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
    },
    60_000,
  );
});
