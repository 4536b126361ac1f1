// Automatic compaction through the TypeScript runner SDK and its AI SDK
// adapter: when a runner session's request is over its budget
// (ModelRequest.compaction), runAiSdkTurns has the runner's own model write
// the summary (plugin/compaction/start, surface/replace, plugin/compaction/end)
// before the turn, and the turn's request holds the summary, not the history.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MockLanguageModelV3 } from 'ai/test';
import type { LanguageModelV3Prompt, LanguageModelV3StreamPart } from '@ai-sdk/provider';
import { ForklineRunner } from '@forkline/runner';
import { runAiSdkTurns } from '@forkline/ai-sdk';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
let runner: ForklineRunner;
const prompts: LanguageModelV3Prompt[] = [];
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined }, outputTokens: { total: 1, text: 1, reasoning: undefined } };
const userText = (m: LanguageModelV3Prompt[number]) => (m.role === 'user' ? m.content.map((p) => (p.type === 'text' ? p.text : '')).join('') : '');

const model = new MockLanguageModelV3({
  doStream: async ({ prompt }) => {
    prompts.push(prompt);
    const last = userText(prompt.at(-1)!);
    const text = last.startsWith('Summarise the conversation below.')
      ? `Runner summary: ${last.split('\n').filter((l) => l.startsWith('[')).length} lines`
      : 'ok';
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: text },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage },
    ];
    return { stream: new ReadableStream({ start: (c) => (parts.forEach((p) => c.enqueue(p)), c.close()) }) };
  },
});

beforeAll(async () => {
  app = await startTestApp();
  runner = new ForklineRunner({ url: app.url, pool: 'sdk-compact' });
});
afterAll(async () => {
  await runner?.close();
  await app.close();
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
