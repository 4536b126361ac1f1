// A replay of a step of several answers (a model called again within its step)
// whose later answers say something new: sessionTurns(afterSeq) over the real
// graphql-ws client and GET /chat/<id>/stream read by the `ai` package's
// readUIMessageStream give every answer's text, in order, once, as a live turn
// streams it (each answer's text as the step's deltas, before its call's
// result). Before, a stored answer's text was sent only when it continued the
// text already given: a second answer that said something new was not sent at
// all, and one that began as the first did lost its beginning. Live, an
// external runner's second answer in a step was lost the same way (its deltas
// came after the step's first answer was stored, and were dropped).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs } from '../helpers/subscribe.ts';
import { importedRecording, replayChat } from '../helpers/chat-replay.ts';
import { waitFor } from '../helpers/wait.ts';
import { claimSession } from '../helpers/claimed-session.ts';
import { answerEvents, externalSession, publishDelta, queueInput, toldByUpdates, turnEnding, turnOpening } from '../helpers/step-answers.ts';
import { turnsFromLog } from '../../src/host/live/turn-stream.ts';
import { readOpenTail, type TurnUpdate } from '../../src/agent/turn-updates.ts';
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
  id = (await importedRecording(base, multiAnswerTurnRecording(2, 3, 'ses_answerssaynew', say))).id;
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
    const { chunks, message, errors } = await replayChat(base, id);
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

describe('a live step of several answers (an external runner’s), followed by sessionTurns(afterSeq)', () => {
  it('gets every answer’s text, in order, once: the text the live relay streamed for the step', async () => {
    const sid = await externalSession(app, 'ext');
    const sendMessage = await queueInput(app, sid);
    const fields = `{ kind step text callId }`;
    type U = { sessionTurns: TurnUpdate };
    // The first describe's subscription may still be ending: gone first, so the count below is these two.
    await waitFor(() => app.services.live.stats().turns === 0, { what: 'no turn subscriber left' });
    // Both listen before the turn starts: one live only (the relay as the runner streams), one from the log and then live.
    const relay = subscribeWs<U>(app.url, `subscription($id: ID!) { sessionTurns(sessionId: $id) ${fields} }`, { id: sid });
    const merged = subscribeWs<U>(app.url, `subscription($id: ID!, $after: Int!) { sessionTurns(sessionId: $id, afterSeq: $after) ${fields} }`, {
      id: sid,
      after: sendMessage.seq,
    });
    await waitFor(() => app.services.live.stats().turns === 2, { what: 'both subscribers registered' });
    const { token, append } = await claimSession(app, sid);
    const delta = (text: string) => publishDelta(app, sid, token, text);
    await append([
      { type: 'inbox/remove', data: { inputId: sendMessage.inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: sendMessage.inputId } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
    ]);
    await delta('Let me ');
    await delta('look. ');
    await append(FIRST_ANSWER);
    // The model is called again within the step: its second answer streams, then is stored.
    await delta('It is ');
    await delta('12:00.');
    await append(SECOND_ANSWER);
    const ended = (items: U[]) => items.some((u) => u.sessionTurns.kind === 'TURN_ENDED');
    await relay.until(ended, 'the relay’s turn end');
    await merged.until(ended, 'the merged turn end');
    await relay.close();
    await merged.close();
    // As the runner streamed it: the second answer's text after the first's call's result.
    expect(toldByUpdates(relay.items.map((i) => i.sessionTurns))).toBe('Let me look. [c1]It is 12:00.');
    // What the contract promises this subscriber (docs/contract.md, sessionTurns; docs/api.md "Live turns"): the step's
    // text whole, once, in order, and the call's result once, from the log, after its answer (seq order). Where the
    // result falls among the second answer's deltas is when this subscriber reads the log, which two independent
    // streams leave open: after "Let me look. ", or after all of the relay's deltas (a subscriber behind on a loaded
    // machine). The old code: "Let me look. [c1]": the second answer's deltas came after its first was stored, and its
    // stored text did not continue it.
    const mergedText = toldByUpdates(merged.items.map((i) => i.sessionTurns));
    expect(mergedText.replace('[c1]', '')).toBe('Let me look. It is 12:00.');
    expect(mergedText.indexOf('[c1]')).toBeGreaterThanOrEqual('Let me look. '.length);
  });

  it('the relay ahead of the log, into the second answer, before the first is read: its text once', async () => {
    const sid = (await app.services.store.createSession({ tenant: 'local' }, {})).id;
    await app.services.store.append(sid, [...turnOpening(), ...FIRST_ANSWER, ...SECOND_ANSWER]);
    const stored = await app.services.store.log.page(sid, -1, 100);
    const firstAnswer = stored.findIndex((e) => e.type === 'model/message');
    // The subscriber reads the log up to the step's start, then the relay gives it the first answer's deltas and the
    // second's beginning before it reads the first answer (a subscriber behind on the log).
    let relayAhead!: () => void;
    const ahead = new Promise<void>((r) => (relayAhead = r));
    let logPastFirst!: () => void;
    const pastFirst = new Promise<void>((r) => (logPastFirst = r));
    const log = (async function* () {
      for (const [i, e] of stored.entries()) {
        if (i === firstAnswer) await ahead;
        if (i === firstAnswer + 1) logPastFirst(); // the first answer is taken (the next is asked for once it is)
        yield e;
      }
    })();
    const delta = (text: string): TurnUpdate => ({ sessionId: sid, kind: 'TEXT_DELTA', turn: 1, step: 1, text });
    const live = (async function* () {
      yield* [delta('Let me '), delta('look. '), delta('It is ')];
      relayAhead();
      await pastFirst;
      yield delta('12:00.');
      await new Promise(() => {}); // the relay stays open
    })();
    const updates: TurnUpdate[] = [];
    for await (const u of turnsFromLog(sid, log, live, 0, readOpenTail(app.services.store.log))) updates.push(u);
    expect(updates.at(-1)?.kind).toBe('TURN_ENDED');
    // The old code: "Let me look. It is [c1]" (the second answer lost); sent whole, the second answer would say "It is " twice.
    expect(toldByUpdates(updates)).toBe('Let me look. It is [c1]12:00.');
  });
});

const FIRST_ANSWER = answerEvents('Let me look. ', 'c1');
const SECOND_ANSWER = [...answerEvents('It is 12:00.'), ...turnEnding()];
