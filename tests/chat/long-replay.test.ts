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
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { importedRecording, replayChat } from '../helpers/chat-replay.ts';
import { multiAnswerCallId, multiAnswerTurnRecording } from '../fixtures/recordings/recordings.ts';

let app: TestApp;
let base: string;
beforeAll(async () => {
  app = await startTestApp();
  base = app.url.replace(/\/graphql$/, '');
});
afterAll(() => app?.close());

/** What the replay of multiAnswerTurnRecording(steps, answers) must be: every call's input before its output, each once, in the log's order. */
function expectWhole({ chunks, message, errors }: Awaited<ReturnType<typeof replayChat>>, steps: number, answers: number) {
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
    const { id } = await importedRecording(base, multiAnswerTurnRecording(2, 3, 'ses_threeanswers'));
    // The old code wrote step 1's first answer's call only: the client met call_1_2's output with no call (an error).
    expectWhole(await replayChat(base, id), 2, 3);
  }, 60_000);

  it.each([
    [2510, 4],
    [6250, 1],
  ])(
    'a turn of 25,000 events (%i steps of %i answers) to a client that stalls first: the whole answer, in order',
    async (steps, answers) => {
      const session = await importedRecording(base, multiAnswerTurnRecording(steps, answers, `ses_longreplay${answers}`));
      expect(session.eventCount).toBe(3 + steps * (2 + 2 * answers) + 1);
      const started = performance.now();
      const replayed = await replayChat(base, session.id, 3000, false);
      console.log(`a /chat replay of ${session.eventCount} events: ${replayed.chunks.length} chunks in ${(performance.now() - started).toFixed(0)} ms`);
      // The old code: an error "subscriber too slow" after about 20 steps, and no more.
      expectWhole(replayed, steps, answers);
    },
    300_000,
  );
});
