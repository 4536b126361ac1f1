// sessionTurns(afterSeq) through the typed graphql-ws client: a client that
// subscribes after sending (or long after the turn ended, or in the middle of
// a streaming step) still sees the whole turn, each stored update exactly once
// and each step's text whole.
import { describe, expect, it } from 'vitest';
import { useClientApp } from '../helpers/client-app.ts';
import { waitFor } from '../helpers/wait.ts';
import { CreateSessionDocument, SendMessageDocument, SessionTurnsDocument } from '@forkline/client';

const t = useClientApp();

type Update = { kind: string; seq?: number | null; turn: number; step?: number | null; text?: string | null; inputId?: string | null };

/** Reads updates until the turn ends; returns them in order. */
async function untilTurnEnds(sub: AsyncIterator<{ sessionTurns: Update }>): Promise<Update[]> {
  const out: Update[] = [];
  for (;;) {
    const r = await sub.next();
    if (r.done) throw new Error(`stream ended after ${JSON.stringify(out.map((u) => u.kind))}`);
    out.push(r.value.sessionTurns);
    if (r.value.sessionTurns.kind === 'TURN_ENDED') return out;
  }
}

/** The stored model messages' texts of the session, by "turn:step". */
async function storedTexts(sessionId: string): Promise<Map<string, string>> {
  const r = await t.app.gql<{ session: { events: { edges: Array<{ node: { type: string; data: { turn: number; step: number; text: string } } }> } } }>(
    `query ($id: ID!) { session(id: $id) { events(first: 500) { edges { node { type data } } } } }`,
    { id: sessionId },
  );
  const texts = new Map<string, string>();
  for (const { node } of r.data!.session.events.edges)
    if (node.type === 'model/message' && node.data.text) texts.set(`${node.data.turn}:${node.data.step}`, node.data.text);
  return texts;
}

function textsOf(updates: Update[]): Map<string, string> {
  const texts = new Map<string, string>();
  for (const u of updates) if (u.kind === 'TEXT_DELTA') texts.set(`${u.turn}:${u.step}`, (texts.get(`${u.turn}:${u.step}`) ?? '') + (u.text ?? ''));
  return texts;
}

function expectWholeTurn(updates: Update[], inputId: string) {
  expect(updates[0]).toMatchObject({ kind: 'TURN_STARTED', inputId });
  const stored = updates.filter((u) => u.kind !== 'TEXT_DELTA' && u.kind !== 'TOOL_RUNNING' && u.kind !== 'TOOL_PROGRESS');
  const seqs = stored.map((u) => u.seq!);
  // Each stored update once, in log order.
  expect(seqs.every((s, i) => typeof s === 'number' && (i === 0 || s > seqs[i - 1]))).toBe(true);
  expect(stored.map((u) => u.kind)).toEqual(['TURN_STARTED', 'STEP_STARTED', 'TOOL_FINISHED', 'STEP_ENDED', 'STEP_STARTED', 'STEP_ENDED', 'TURN_ENDED']);
}

const TWO_STEPS = '!slow 20\nwhat time is it in words\n!call clock {}';

describe('sessionTurns(afterSeq)', () => {
  it('subscribed right after sending: the whole turn, stored updates once, texts whole', async () => {
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'after send' } });
    const { sendMessage } = await t.client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: TWO_STEPS } });
    const sub = t.client.subscribe(SessionTurnsDocument, { sessionId: createSession.id, afterSeq: sendMessage.event.seq });
    const updates = await untilTurnEnds(sub);
    await sub.return?.();
    expectWholeTurn(updates, sendMessage.inputId);
    expect(textsOf(updates)).toEqual(await storedTexts(createSession.id));
  });

  it('subscribed after the turn ended: replayed from the log alone', async () => {
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'after end' } });
    const { sendMessage } = await t.client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: TWO_STEPS } });
    await waitFor(
      async () =>
        (await storedTexts(createSession.id)).size === 1 &&
        (await t.app.ok(`query ($id: ID!) { session(id: $id) { status } }`, { id: createSession.id })).session.status === 'IDLE',
      {
        what: 'turn stored',
      },
    );
    const sub = t.client.subscribe(SessionTurnsDocument, { sessionId: createSession.id, afterSeq: sendMessage.event.seq });
    const updates = await untilTurnEnds(sub);
    await sub.return?.();
    expectWholeTurn(updates, sendMessage.inputId);
    expect(textsOf(updates)).toEqual(await storedTexts(createSession.id));
  });

  it("subscribed in the middle of a streaming step: that step's text still arrives exactly once", async () => {
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'mid-step' } });
    const words = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ');
    // The earlier tests' subscriptions end over the socket while mutations go over HTTP: gone first, so the count below is this one's.
    await waitFor(() => t.app.services.live.stats().turns === 0, { what: 'no turn subscriber left' });
    const watcher = t.client.subscribe(SessionTurnsDocument, { sessionId: createSession.id });
    const firstDelta = (async () => {
      for (;;) {
        const r = await watcher.next();
        if (r.done || r.value.sessionTurns.kind === 'TEXT_DELTA') return;
      }
    })();
    await waitFor(() => t.app.services.live.stats().turns === 1, { what: 'watcher registered' });
    const { sendMessage } = await t.client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: `!slow 15\n${words}` } });
    await firstDelta; // the step is streaming now
    const sub = t.client.subscribe(SessionTurnsDocument, { sessionId: createSession.id, afterSeq: sendMessage.event.seq });
    const updates = await untilTurnEnds(sub);
    await sub.return?.();
    await watcher.return?.();
    expect(updates.filter((u) => u.seq != null).map((u) => u.kind)).toEqual(['TURN_STARTED', 'STEP_STARTED', 'STEP_ENDED', 'TURN_ENDED']);
    expect(textsOf(updates)).toEqual(await storedTexts(createSession.id));
  });

  it('without afterSeq: live only, stored updates carry their seq', async () => {
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'live only' } });
    // The earlier tests' subscriptions end over the socket while mutations go over HTTP: gone first, so the count below is this one's.
    await waitFor(() => t.app.services.live.stats().turns === 0, { what: 'no turn subscriber left' });
    const sub = t.client.subscribe(SessionTurnsDocument, { sessionId: createSession.id });
    const first = sub.next();
    await waitFor(() => t.app.services.live.stats().turns === 1, { what: 'registered' });
    const { sendMessage } = await t.client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: 'hello' } });
    expect((await first).value?.sessionTurns).toMatchObject({ kind: 'TURN_STARTED', seq: sendMessage.event.seq + 2, inputId: sendMessage.inputId });
    await sub.return?.();
  });
});
