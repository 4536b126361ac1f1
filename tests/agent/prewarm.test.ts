// A client watching a long session's turns (a chat open on it) gets the agent
// ready: the session's fold is built ahead, so the first message's turn reads
// only its new events instead of replaying the whole log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeWs } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

const LONG = 12_000; // above the prewarm threshold (10,000 events)
let app: TestApp;
let eventRowsRead = 0;

beforeAll(async () => {
  app = await startTestApp({
    onQuery: (sql, rows) => {
      if (/FROM "Event"/.test(sql)) eventRowsRead += rows;
    },
  });
});
afterAll(() => app.close());

const TURNS = `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind turn } }`;

async function longSession(title: string): Promise<string> {
  const id = (await app.ok(`mutation($t: String) { createSession(input: { title: $t }) { id } }`, { t: title })).createSession.id as string;
  const notes = Array.from({ length: LONG - 1 }, (_, i) => ({ type: 'plugin/test/note', data: { i } }));
  for (let i = 0; i < notes.length; i += 4000) await app.services.store.append(id, notes.slice(i, i + 4000));
  return id;
}

/** Event rows read from sending a message to the end of its turn. */
async function firstTurnReads(id: string): Promise<number> {
  eventRowsRead = 0;
  await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'hello' } });
  await app.services.host.idle();
  const { session } = await app.ok(`query($id: ID!) { session(id: $id) { turnCount status } }`, { id });
  expect(session).toEqual({ turnCount: 1, status: 'IDLE' });
  return eventRowsRead;
}

describe('building a fold ahead', () => {
  it('a watched long session answers its first message reading only the new events; an unwatched one replays its log', async () => {
    const watched = await longSession('watched');
    const sub = subscribeWs(app.url, TURNS, { id: watched });
    await waitFor(() => app.services.live.stats().turns === 1, { what: 'the turn subscription' });
    await app.services.host.idle(); // the fold built ahead
    const watchedReads = await firstTurnReads(watched);
    const turn = await sub.until((u) => u.some((x: any) => x.sessionTurns.kind === 'TURN_ENDED'), 'TURN_ENDED');
    expect(turn[0].sessionTurns).toEqual({ kind: 'TURN_STARTED', turn: 1 });
    await sub.close();

    const unwatched = await longSession('unwatched');
    const unwatchedReads = await firstTurnReads(unwatched);

    expect(unwatchedReads).toBeGreaterThanOrEqual(LONG); // the cold replay
    expect(watchedReads).toBeLessThan(100); // the turn's own events and a tail check
  });

  it('a message sent while the fold is still being built waits for it instead of replaying the log a second time', async () => {
    const id = await longSession('sent at once');
    const sub = subscribeWs(app.url, TURNS, { id });
    await waitFor(() => app.services.live.stats().turns === 1, { what: 'the turn subscription' });
    const reads = await firstTurnReads(id); // sent at once: the build ahead has not even started
    expect(reads).toBeGreaterThanOrEqual(LONG); // the log was read once…
    expect(reads).toBeLessThan(LONG * 1.5); // …not twice
    await sub.close();
  });

  it('a short session is not built ahead (it replays in milliseconds)', async () => {
    const id = (await app.ok(`mutation { createSession(input: { title: "short" }) { id } }`)).createSession.id as string;
    await app.services.store.append(id, [{ type: 'plugin/test/note', data: { i: 0 } }]);
    const sub = subscribeWs(app.url, TURNS, { id });
    await waitFor(() => app.services.live.stats().turns === 1, { what: 'the turn subscription' });
    eventRowsRead = 0;
    await app.services.host.idle();
    expect(eventRowsRead).toBe(0);
    await sub.close();
  });
});
