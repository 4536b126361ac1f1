// A /chat replay (GET /chat/<id>/stream, what the AI SDK's resume asks) of a long
// turn, read by the `ai` package's own client: DefaultChatTransport's
// reconnectToStream and readUIMessageStream. Before, a turn of 25,000 events
// (2,510 steps of four answers, each with a call) ended after about 20 steps
// with "subscriber too slow": the log was read into the turn updates' queue
// (bounded at 10,000) without waiting for the answer, which reads the calls of
// each step from the log. And a step of several answers had only its first
// answer's calls written (tool-input-available): the client then met an output
// of a call it had never seen.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { multiAnswerCallId, multiAnswerTurnRecording } from '../fixtures/recordings/recordings.ts';

let app: TestApp;
let base: string;
beforeAll(async () => {
  app = await startTestApp();
  base = app.url.replace(/\/graphql$/, '');
});
afterAll(() => app?.close());

async function imported(body: string): Promise<{ id: string; eventCount: number }> {
  const res = await fetch(`${base}/recordings`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
  expect(res.status).toBe(201);
  return ((await res.json()) as { session: { id: string; eventCount: number } }).session;
}

/** The stream, read by a client that first reads nothing for `stallMs` (the server's socket buffers fill meanwhile). */
function stalled(stream: ReadableStream<UIMessageChunk>, stallMs: number): ReadableStream<UIMessageChunk> {
  const reader = stream.getReader();
  let started = false;
  return new ReadableStream<UIMessageChunk>(
    {
      async pull(controller) {
        if (!started) await new Promise((r) => setTimeout(r, stallMs));
        started = true;
        const r = await reader.read();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/**
 * The chat's answer replayed, as the AI SDK's client reads it (DefaultChatTransport parses each chunk with the
 * protocol's schema) and, with `build`, builds it (readUIMessageStream, which copies the message at every chunk: a
 * message of 10,000 parts is read in seconds, built in minutes).
 */
async function replay(chatId: string, stallMs = 0, build = true) {
  const transport = new DefaultChatTransport({ api: `${base}/chat` });
  const stream = await transport.reconnectToStream({ chatId });
  expect(stream).not.toBeNull();
  const [a, b] = stalled(stream!, stallMs).tee();
  const chunks: UIMessageChunk[] = [];
  const reading = (async () => {
    const reader = a.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
  })();
  const errors: unknown[] = [];
  let message: UIMessage | undefined;
  if (build) for await (const m of readUIMessageStream({ stream: b, onError: (e) => errors.push(e), terminateOnError: false })) message = m;
  else await b.cancel();
  await reading;
  if (!build) for (const c of chunks) if (c.type === 'error') errors.push(new Error(c.errorText));
  return { chunks, message, errors };
}

/** What the replay of multiAnswerTurnRecording(steps, answers) must be: every call's input before its output, each once, in the log's order. */
function expectWhole({ chunks, message, errors }: Awaited<ReturnType<typeof replay>>, steps: number, answers: number) {
  // The turn was interrupted: its one error is the answer's last word, said by the server.
  expect(errors.map((e) => (e as Error).message ?? String(e))).toEqual([expect.stringMatching(/interrupted/)]);
  expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'error', messageMetadata: { reason: 'interrupted' } });
  const calls: string[] = [];
  for (let step = 1; step <= steps; step++) for (let a = 1; a <= answers; a++) calls.push(multiAnswerCallId(step, a));
  const tools = chunks.filter((c) => c.type === 'tool-input-available' || c.type === 'tool-output-available') as Array<{ type: string; toolCallId: string }>;
  expect(tools.map((c) => `${c.type === 'tool-input-available' ? 'in' : 'out'} ${c.toolCallId}`)).toEqual(calls.flatMap((id) => [`in ${id}`, `out ${id}`]));
  expect(chunks.filter((c) => c.type === 'start-step')).toHaveLength(steps);
  expect(chunks.filter((c) => c.type === 'finish-step')).toHaveLength(steps);
  const texts = new Map<string, string>();
  for (const c of chunks) if (c.type === 'text-delta') texts.set(c.id, (texts.get(c.id) ?? '') + c.delta);
  expect([...texts.values()]).toEqual(Array.from({ length: steps }, (_, i) => `step ${i + 1}`));
  if (!message) return;
  const parts = message.parts.filter((p) => p.type === 'dynamic-tool') as Array<{ toolCallId: string; state: string; input: unknown; output: unknown }>;
  expect(parts).toHaveLength(calls.length);
  expect(parts.every((p) => p.state === 'output-available')).toBe(true);
  expect(parts.at(-1)).toMatchObject({ toolCallId: calls.at(-1), input: { step: steps, a: answers }, output: `t${steps}.${answers}` });
  expect(message.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual([...texts.values()]);
}

describe('a /chat replay of a long turn, read by the AI SDK', () => {
  it('a step of several answers: every answer’s calls are written, each before its output', async () => {
    const { id } = await imported(multiAnswerTurnRecording(2, 3, 'ses_threeanswers'));
    // The old code wrote step 1's first answer's call only: the client met call_1_2's output with no call (an error).
    expectWhole(await replay(id), 2, 3);
  }, 60_000);

  it.each([
    [2510, 4],
    [6250, 1],
  ])(
    'a turn of 25,000 events (%i steps of %i answers) to a client that stalls first: the whole answer, in order',
    async (steps, answers) => {
      const session = await imported(multiAnswerTurnRecording(steps, answers, `ses_longreplay${answers}`));
      expect(session.eventCount).toBe(3 + steps * (2 + 2 * answers) + 1);
      const started = performance.now();
      const replayed = await replay(session.id, 3000, false);
      console.log(`a /chat replay of ${session.eventCount} events: ${replayed.chunks.length} chunks in ${(performance.now() - started).toFixed(0)} ms`);
      // The old code: an error "subscriber too slow" after about 20 steps, and no more.
      expectWhole(replayed, steps, answers);
    },
    300_000,
  );
});
