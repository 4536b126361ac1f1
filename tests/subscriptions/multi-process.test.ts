// Two service processes on one database: subscribers on A receive what B's
// agent writes, once each and in order, over WebSocket and SSE.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { openSubscriptions, subscribeSse, subscribeWs, subscriptionsOpened } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

let a: ServiceProcess;
let b: ServiceProcess;
beforeAll(async () => {
  const env = { DATABASE_URL: await createTestDatabase(), PORT: '0', FORKLINE_API_TOKENS: undefined };
  [a, b] = await Promise.all([startService({ env }), startService({ env })]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
});

const EVENTS = `subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq type data } }`;
const TURNS = `subscription($id: ID!) { sessionTurns(sessionId: $id) { kind turn step text reason } }`;
const CHANGED = `subscription { sessionsChanged { id status eventCount turnCount parent { id } } }`;

async function ok(url: string, query: string, variables?: unknown) {
  const r = await postGraphQL(url, query, variables);
  if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
  return r.body.data;
}

describe('two processes, one database', () => {
  it('every event and turn update written through B reaches subscribers on A once, in order (WS and SSE)', async () => {
    const open = await openSubscriptions(a.url);
    const changed = subscribeWs(a.url, CHANGED);
    const { createSession } = await ok(b.url, 'mutation { createSession(input: { title: "two" }) { id } }');
    const id = createSession.id as string;
    const viaWs = subscribeWs(a.url, EVENTS, { id });
    const viaSse = subscribeSse(a.url, EVENTS, { id });
    const turnsWs = subscribeWs(a.url, TURNS, { id });
    const turnsSse = subscribeSse(a.url, TURNS, { id });
    // All five listen on A before B writes anything they expect: the turn subscriptions and sessionsChanged are
    // live only (TURN_STARTED and the RUNNING row are not replayed), and A's gauge rises once each is registered.
    await subscriptionsOpened(a.url, open, 5);
    await Promise.all([viaWs.count(1), viaSse.count(1)]);

    const inputs = [
      '!slow 5\nfirst turn answers in words',
      'second turn\n!call clock\n!then\n!call note_write {"key":"k","value":"v"}',
      '!slow 5\nthird and last turn',
    ];
    for (const text of inputs) await ok(b.url, 'mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text } });
    const session = await waitFor(
      async () => {
        const s = (await ok(b.url, 'query($id: ID!) { session(id: $id) { status turnCount eventCount } }', { id })).session;
        return s.status === 'IDLE' && s.turnCount === 3 ? s : undefined;
      },
      { what: 'three turns' },
    );
    const expected = Array.from({ length: session.eventCount }, (_, i) => i);
    for (const sub of [viaWs, viaSse]) {
      await sub.count(session.eventCount);
      await new Promise((r) => setTimeout(r, 100)); // anything extra would be a duplicate
      expect(sub.items.map((i) => i.sessionEvents.seq)).toEqual(expected);
    }
    const log = viaWs.items.map((i) => i.sessionEvents);
    expect(log.filter((e) => e.type === 'turn/end').map((e) => e.data.reason)).toEqual(['completed', 'completed', 'completed']);
    const texts = log.filter((e) => e.type === 'model/message' && e.data.text).map((e) => e.data.text);

    for (const turns of [turnsWs, turnsSse]) {
      await turns.until((u) => u.filter((x) => x.sessionTurns.kind === 'TURN_ENDED').length === 3, '3 TURN_ENDED');
      const updates = turns.items.map((i) => i.sessionTurns);
      expect(updates.filter((u) => u.kind === 'TURN_STARTED').map((u) => u.turn)).toEqual([1, 2, 3]);
      // Deltas of one step, joined, are that step's model/message text.
      const joined = new Map<string, string>();
      for (const u of updates.filter((x) => x.kind === 'TEXT_DELTA')) joined.set(`${u.turn}.${u.step}`, (joined.get(`${u.turn}.${u.step}`) ?? '') + u.text);
      expect([...joined.values()]).toEqual(texts);
    }

    await changed.until(
      (rows) => rows.some((r) => r.sessionsChanged.id === id && r.sessionsChanged.turnCount === 3 && r.sessionsChanged.status === 'IDLE'),
      'final row',
    );
    expect(changed.items.some((r) => r.sessionsChanged.id === id && r.sessionsChanged.status === 'RUNNING')).toBe(true);
    await Promise.all([viaWs, viaSse, turnsWs, turnsSse, changed].map((s) => s.close()));
  });
});
