// Automatic compaction through the TypeScript runner SDK and its adapters:
// when a runner session's request is over its budget
// (ModelRequest.compaction), runAiSdkTurns and runAgentsTurns have the
// runner's own model write the summary (plugin/compaction/start,
// surface/replace, plugin/compaction/end) before the turn, and the turn's
// request holds the summary, not the history. The Agents adapter's model is
// the Agents SDK's OpenAI Responses model, talking to a fake Responses API.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, OpenAIProvider, setTracingDisabled } from '@openai/agents';
import { MockLanguageModelV3 } from 'ai/test';
import type { LanguageModelV3Prompt, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { ForklineRunner } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { runAgentsTurns } from '@forkline/openai-agents';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
let runner: ForklineRunner;
const prompts: LanguageModelV3Prompt[] = [];
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
const userText = (m: LanguageModelV3Prompt[number]) => (m.role === 'user' ? m.content.map((p) => (p.type === 'text' ? p.text : '')).join('') : '');

/** A model's streamed answer of `text` alone. */
function textStream(text: string) {
  const parts: LanguageModelV3StreamPart[] = [
    { type: 'stream-start', warnings: [] },
    { type: 'text-start', id: 't' },
    { type: 'text-delta', id: 't', delta: text },
    { type: 'text-end', id: 't' },
    { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage },
  ];
  return { stream: new ReadableStream<LanguageModelV3StreamPart>({ start: (c) => (parts.forEach((p) => c.enqueue(p)), c.close()) }) };
}

const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => {
    prompts.push(prompt);
    const last = userText(prompt.at(-1)!);
    const text = last.startsWith('Summarise the conversation below.')
      ? `Runner summary: ${last.split('\n').filter((l) => l.startsWith('[')).length} lines`
      : 'ok';
    return textStream(text);
  },
});

/** Request bodies the fake Responses API got, in order. */
const responsesBodies: any[] = [];
/**
 * POST /v1/responses, not streamed: a summary request ("Summarise the
 * conversation below.") is answered "Agents summary: <n> lines" (the
 * transcript's lines), anything else "ok".
 */
const responsesApi = http.createServer((req, res) => {
  let raw = '';
  req.on('data', (c) => (raw += c));
  req.on('end', () => {
    const body = JSON.parse(raw);
    responsesBodies.push(body);
    const texts = (body.input as any[]).flatMap((i) => (typeof i.content === 'string' ? [i.content] : (i.content ?? []).map((p: any) => p.text ?? '')));
    const prompt = texts.find((t: string) => t.startsWith('Summarise the conversation below.'));
    const text = prompt ? `Agents summary: ${prompt.split('\n').filter((l: string) => l.startsWith('[')).length} lines` : 'ok';
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        id: `resp_${responsesBodies.length}`,
        object: 'response',
        created_at: 1,
        model: body.model,
        status: 'completed',
        output: [
          {
            type: 'message',
            id: `msg_${responsesBodies.length}`,
            role: 'assistant',
            status: 'completed',
            content: [{ type: 'output_text', text, annotations: [] }],
          },
        ],
        usage: {
          input_tokens: 3,
          output_tokens: 2,
          total_tokens: 5,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        },
      }),
    );
  });
});

beforeAll(async () => {
  setTracingDisabled(true);
  app = await startTestApp();
  runner = new ForklineRunner({ url: app.url, pool: 'sdk-compact' });
  await new Promise<void>((resolve) => responsesApi.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  await runner?.close();
  await app.close();
  responsesApi.close();
});

const send = (sessionId: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
const serve = (id: string) => runner.serve(id, (s) => runAiSdkTurns(s, { resolveModel: () => model }).then(() => {}));

describe('runAiSdkTurns on a session over its budget', () => {
  it('compacts with the runner model first, then runs the turn on the summary', async () => {
    const id = (
      await app.ok(`mutation { createSession(input: {runner: "sdk-compact", model: {provider: "scripted", model: "scripted", contextTokens: 2000}}) { id } }`)
    ).createSession.id;
    await send(id, 'short question');
    expect(await serve(id)).toBe(true);
    await send(id, `a long question: ${'lorem ipsum '.repeat(800)}`);
    expect(await serve(id)).toBe(true);
    const evs = await app.services.store.log.page(id, -1, 1000);
    const firstEnd = evs.find((e) => e.type === 'turn/end')!.seq;
    const types = evs.filter((e) => e.seq > firstEnd && !e.type.startsWith('inbox/')).map((e) => e.type);
    expect(types).toEqual([
      'plugin/compaction/start',
      'surface/replace',
      'plugin/compaction/end',
      'turn/start',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    const replace = evs.find((e) => e.type === 'surface/replace')!;
    expect(replace.data).toEqual({ fromSeq: 0, toSeq: firstEnd, content: 'Runner summary: 2 lines' });
    expect(evs.find((e) => e.type === 'plugin/compaction/end')!.data).toMatchObject({ reason: 'automatic', summarySeq: replace.seq });
    // The runner's model was asked for the summary, then sent the summary instead of the first turn.
    const turnPrompt = prompts.at(-1)!;
    expect(turnPrompt.map((m) => m.role)).toEqual(['system', 'user']);
    expect(JSON.stringify(turnPrompt[0])).toContain('Runner summary: 2 lines');
  });
});

describe('runAgentsTurns on a session over its budget', () => {
  it("compacts with the session's model (a Responses API model) first, then runs the turn on the summary", async () => {
    const { port } = responsesApi.address() as AddressInfo;
    const model = await new OpenAIProvider({ apiKey: 'test', baseURL: `http://127.0.0.1:${port}/v1`, useResponses: true }).getModel('fake-model');
    const agent = new Agent({ name: 'compacting', instructions: 'Answer briefly.', model });
    const serveAgents = (id: string) => runner.serve(id, (s) => runAgentsTurns(s, agent, { resolveModel: () => model, stream: false }).then(() => {}));
    const id = (
      await app.ok(`mutation { createSession(input: {runner: "sdk-compact", model: {provider: "scripted", model: "scripted", contextTokens: 2000}}) { id } }`)
    ).createSession.id;
    await send(id, 'short question');
    expect(await serveAgents(id)).toBe(true);
    await send(id, `a long question: ${'lorem ipsum '.repeat(800)}`);
    expect(await serveAgents(id)).toBe(true);
    const evs = await app.services.store.log.page(id, -1, 1000);
    const firstEnd = evs.find((e) => e.type === 'turn/end')!.seq;
    const types = evs.filter((e) => e.seq > firstEnd && !e.type.startsWith('inbox/')).map((e) => e.type);
    // A failed summary ends the compaction with its error (and no surface/replace): shown when it happens.
    expect(types, JSON.stringify(evs.find((e) => e.type === 'plugin/compaction/end')?.data)).toEqual([
      'plugin/compaction/start',
      'surface/replace',
      'plugin/compaction/end',
      'turn/start',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    const replace = evs.find((e) => e.type === 'surface/replace')!;
    expect(replace.data).toEqual({ fromSeq: 0, toSeq: firstEnd, content: 'Agents summary: 2 lines' });
    expect(evs.find((e) => e.type === 'plugin/compaction/end')!.data).toMatchObject({ reason: 'automatic', summarySeq: replace.seq });
    // The Responses API got the first turn, the summary request, then the second turn with the summary instead of the first.
    expect(responsesBodies).toHaveLength(3);
    const last = JSON.stringify(responsesBodies[2].input);
    expect(last).toContain('Agents summary: 2 lines');
    expect(last).not.toContain('short question');
  });
});

describe('a summary the server refuses', () => {
  it('ends the compaction failed with the refusal instead of sending it again, and the turn still runs', async () => {
    const small = await startTestApp({ security: { maxBodyBytes: 64 * 1024 } });
    const smallRunner = new ForklineRunner({ url: small.url, pool: 'sdk-compact-refused' });
    let summaries = 0;
    const bigSummary = new MockLanguageModelV3({
      doStream: async ({ prompt }) => {
        const summary = userText(prompt.at(-1)!).startsWith('Summarise the conversation below.');
        if (summary) summaries++;
        const text = summary ? 'x'.repeat(128 * 1024) : 'ok'; // the summary's batch is over the server's 64 KiB body limit
        return textStream(text);
      },
    });
    try {
      const id = (
        await small.ok(
          `mutation { createSession(input: {runner: "sdk-compact-refused", model: {provider: "scripted", model: "scripted", contextTokens: 2000}}) { id } }`,
        )
      ).createSession.id;
      const sendSmall = (text: string) => small.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
      const serveSmall = () => smallRunner.serve(id, (s) => runAiSdkTurns(s, { resolveModel: () => bigSummary }).then(() => {}));
      await sendSmall('short question');
      expect(await serveSmall()).toBe(true);
      await sendSmall(`a long question: ${'lorem ipsum '.repeat(800)}`);
      expect(await serveSmall()).toBe(true);
      const evs = await small.services.store.log.page(id, -1, 1000);
      const firstEnd = evs.find((e) => e.type === 'turn/end')!.seq;
      const types = evs.filter((e) => e.seq > firstEnd && !e.type.startsWith('inbox/')).map((e) => e.type);
      expect(types).toEqual(['plugin/compaction/start', 'plugin/compaction/end', 'turn/start', 'step/start', 'model/message', 'step/end', 'turn/end']);
      const end = evs.find((e) => e.type === 'plugin/compaction/end')!.data as { error?: string; summarySeq?: number };
      expect(end.error).toMatch(/^the server refused the summary: /);
      expect(end.summarySeq).toBeUndefined();
      expect(summaries).toBe(1); // not asked again in this claim
    } finally {
      await smallRunner.close();
      await small.close();
    }
  });
});
