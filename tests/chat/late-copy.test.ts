// A runner that sends a late copy of an answer (its deltas published after it
// stored the answer), read by subscribers that lag behind the log: an external
// runner through the real GraphQL door (claimSession, publishTurnUpdate,
// appendEvents), its deltas through the real relay (NOTIFY), and readers that
// read the session's log as the server streams it, held just before the
// answer is stored until the relay has given them the copy: sessionTurns from
// a seq (as /chat reads it: turnsFromLog) and an AG-UI run (RunTranslator).
// Before, such a reader showed the copy once (the log had not shown it the
// answer stored yet, so the copy looked like the answer streaming); now each
// answer's text comes once, and the next answer still streams.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventType, type BaseEvent } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { claimSession } from '../helpers/claimed-session.ts';
import { answerEvents, externalSession, publishDelta, queueInput, toldByAgui, toldByUpdates, turnEnding } from '../helpers/step-answers.ts';
import { turnsFromLog } from '../../src/host/live/turn-stream.ts';
import { readOpenTail, type TurnUpdate } from '../../src/agent/turn-updates.ts';
import { RunTranslator } from '../../src/agui/agui-events.ts';
import type { LogEvent } from '../../src/core/events.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

const FIRST = 'Let me look. ';
const SECOND = 'It is 12:00.';
/** The step as a reader should tell it: each answer's text once, the first's call's result between them. */
const TOLD = `${FIRST}[c1]${SECOND}`;

/**
 * The session's log as the server streams it (afterSeq on), held before its first stored answer until `go`; and the
 * relay as the server delivers it, with the characters of text it has given its reader.
 */
function laggingReader(sid: string, afterSeq: number) {
  let go!: () => void;
  const opened = new Promise<void>((resolve) => (go = resolve));
  const stream = app.services.live.sessionEvents(sid, afterSeq);
  const log = (async function* (): AsyncGenerator<LogEvent> {
    try {
      for await (const e of stream) {
        if (e.type === 'model/message') await opened;
        yield e;
      }
    } finally {
      await stream.return?.();
    }
  })();
  const relay = app.services.live.sessionTurns(sid);
  let relayedChars = 0;
  const live = (async function* (): AsyncGenerator<TurnUpdate> {
    try {
      for await (const u of relay) {
        yield u;
        relayedChars += u.kind === 'TEXT_DELTA' ? (u.text?.length ?? 0) : 0;
      }
    } finally {
      await relay.return?.();
    }
  })();
  /** Lets go of the log's stream and the relay subscription (the generators above end with them). */
  const close = () => Promise.all([stream.return?.(), relay.return?.()]);
  return { log, live, go, close, relayed: () => relayedChars };
}

/**
 * The runner's turn: the first answer streams (until the reader `told` it) and is stored with its call's result, then
 * a late copy of it and the second answer, all given to the reader by its relay before its log goes on.
 */
async function runTurn(sid: string, told: () => string, reader: ReturnType<typeof laggingReader>) {
  const { token, append } = await claimSession(app, sid, { startTurn: true });
  const publish = (text: string, answer?: number) => publishDelta(app, sid, token, text, answer);
  await publish('Let me ');
  await publish('look. ');
  await waitFor(() => told() === FIRST, { what: `the first answer streamed (${told()})` });
  await append(answerEvents(FIRST, 'c1'));
  // The late copy (unnamed, then naming its answer), then the second answer as it streams.
  await publish(FIRST);
  await publish(FIRST, 1);
  await publish('It is ', 2);
  await publish('12:00.', 2);
  // The reader's relay gave it all of that while its log had not shown it the first answer stored.
  await waitFor(() => reader.relayed() >= RELAYED, { what: 'the relay gave the reader the late copy and the second answer' });
  reader.go();
  await append([...answerEvents(SECOND), ...turnEnding()]);
}

const RELAYED = 'Let me look. '.length + 2 * FIRST.length + SECOND.length;

async function queuedSession(title: string) {
  const sid = await externalSession(app, title);
  const { seq, inputId } = await queueInput(app, sid);
  return { sid, afterSeq: seq, inputId };
}
const eventCount = async (sid: string) => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: sid })).session.eventCount as number;

describe('a late copy of a stored answer, to a reader behind the log', () => {
  it('sessionTurns from a seq (and /chat): the answer’s text once, the next answer streamed after the result', async () => {
    const { sid, afterSeq } = await queuedSession('late copy turns');
    const reader = laggingReader(sid, afterSeq);
    const liveFrom = await eventCount(sid); // read after the relay subscription was registered, as sessionTurnsAfter reads it
    const turns = turnsFromLog(sid, reader.log, reader.live, liveFrom, readOpenTail(app.services.store.log), afterSeq);
    const updates: TurnUpdate[] = [];
    const reading = (async () => {
      for await (const u of turns) {
        updates.push(u);
        if (u.kind === 'TURN_ENDED') break;
      }
    })();
    const told = () => toldByUpdates(updates);
    await runTurn(sid, told, reader);
    await reading;
    await reader.close();
    // The old code: "Let me look. Let me look. Let me look. [c1]It is 12:00." (the copy shown as the answer streaming).
    expect(told()).toBe(TOLD);
    expect(updates.filter((u) => u.kind === 'TEXT_DELTA' && u.text === 'It is 12:00.').length).toBe(1); // the second answer streamed, whole
  });

  it('an AG-UI run: the answer’s message holds its text once, the next answer a message of its own', async () => {
    const { sid, afterSeq, inputId } = await queuedSession('late copy agui');
    const reader = laggingReader(sid, afterSeq);
    const liveFrom = await eventCount(sid);
    const emitted: BaseEvent[] = [];
    const run = new RunTranslator({ threadId: sid, runId: 'run-late', inputId }, (e) => void emitted.push(e), undefined, undefined, { afterSeq, liveFrom });
    void (async () => {
      for await (const u of reader.live) run.update(u);
    })();
    const following = (async () => {
      for await (const e of reader.log) {
        run.event(e);
        if (run.finished) break;
      }
    })();
    const told = () => toldByAgui(emitted);
    await runTurn(sid, told, reader);
    await following;
    await reader.close();
    expect(emitted.at(-1)?.type).toBe(EventType.RUN_FINISHED);
    // The old code: "Let me look. Let me look. Let me look. [c1]It is 12:00.".
    expect(told()).toBe(TOLD);
    const messages = new Map<string, string>();
    for (const e of emitted) {
      const m = e as BaseEvent & { messageId: string; delta: string };
      if (e.type === EventType.TEXT_MESSAGE_CONTENT) messages.set(m.messageId, (messages.get(m.messageId) ?? '') + m.delta);
    }
    expect([...messages]).toEqual([
      ['msg_1_1', FIRST],
      ['msg_1_1_2', SECOND],
    ]);
  });
});
