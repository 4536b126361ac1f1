// A replay of a step of several answers (a model called again within its step)
// whose later answers say something new: sessionTurns(afterSeq) over the real
// graphql-ws client and GET /chat/<id>/stream read by the `ai` package's
// readUIMessageStream give every answer's text, in order, once, as a live turn
// streams it (each answer's text as the step's deltas, before its call's
// result). Before, a stored answer's text was sent only when it continued the
// text already given: a second answer that said something new was not sent at
// all, and one that began as the first did lost its beginning.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs } from '../helpers/subscribe.ts';
import { multiAnswerCallId, multiAnswerTurnRecording } from '../fixtures/recordings/recordings.ts';

/** What each answer says: step 1's second begins as its first did, its third is new; step 2's first says nothing. */
const SAID: Record<number, string[]> = {
  1: ['Let me look at the clock. ', 'Let me look at the clock. Again, to be sure.', 'It is t1.2 now: a third answer, new text.'],
  2: ['', 'Only the second answer of step 2 says anything.', ''],
};
const say = (step: number, a: number) => SAID[step][a - 1];

/** The step's answers in the log's order: each one's text (when it says something) before its call's result. */
const expectedOrder = () =>
  [1, 2].flatMap((step) => [1, 2, 3].flatMap((a) => [...(say(step, a) ? [`text ${step}: ${say(step, a)}`] : []), `done ${multiAnswerCallId(step, a)}`]));

let app: TestApp;
let base: string;
let id: string;
beforeAll(async () => {
  app = await startTestApp();
  base = app.url.replace(/\/graphql$/, '');
  const res = await fetch(`${base}/recordings`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: multiAnswerTurnRecording(2, 3, 'ses_answerssaynew', say),
  });
  expect(res.status).toBe(201);
  id = ((await res.json()) as { session: { id: string } }).session.id;
});
afterAll(() => app?.close());

describe('a replay of a step whose later answers say something new', () => {
  it('sessionTurns(afterSeq: -1) over graphql-ws: every answer’s text once, in order, before its call’s result', async () => {
    type U = { kind: string; step: number | null; text: string | null; callId: string | null };
    const sub = subscribeWs<{ sessionTurns: U }>(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id, afterSeq: -1) { kind step text callId } }`, {
      id,
    });
    const items = await sub.until((i) => i.some((u) => u.sessionTurns.kind === 'TURN_ENDED'), 'the turn’s end');
    await sub.close();
    const order = items
      .map((i) => i.sessionTurns)
      .flatMap((u) => (u.kind === 'TEXT_DELTA' ? [`text ${u.step}: ${u.text}`] : u.kind === 'TOOL_FINISHED' ? [`done ${u.callId}`] : []));
    // The old code: step 1's second answer as "Again, to be sure." only, and its third not at all.
    expect(order).toEqual(expectedOrder());
  });

  it('GET /chat/<id>/stream read by readUIMessageStream: a text part for each answer that says something, before its call', async () => {
    const transport = new DefaultChatTransport({ api: `${base}/chat` });
    const stream = await transport.reconnectToStream({ chatId: id });
    expect(stream).not.toBeNull();
    const [a, b] = stream!.tee();
    const chunks: UIMessageChunk[] = [];
    const reading = (async () => {
      const reader = a.getReader();
      for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
    })();
    const errors: unknown[] = [];
    let message: UIMessage | undefined;
    for await (const m of readUIMessageStream({ stream: b, onError: (e) => errors.push(e), terminateOnError: false })) message = m;
    await reading;
    // The turn was interrupted: its one error is the answer's last word.
    expect(errors.map((e) => (e as Error).message)).toEqual([expect.stringMatching(/interrupted/)]);
    const parts = message!.parts.flatMap((p) =>
      p.type === 'text' ? [`text ${p.text}`] : p.type === 'dynamic-tool' ? [`done ${p.toolCallId}`] : p.type === 'step-start' ? ['step'] : [],
    );
    const expected = ['step', ...expectedOrder().slice(0, 6), 'step', ...expectedOrder().slice(6)].map((p) => p.replace(/^text \d: /, 'text '));
    // The old code: a text part "Again, to be sure." and none for step 1's third answer.
    expect(parts).toEqual(expected);
    const deltas = chunks.filter((c) => c.type === 'text-delta').map((c) => (c as { delta: string }).delta);
    expect(deltas.join('')).toBe([1, 2].flatMap((step) => SAID[step]).join(''));
  });
});
