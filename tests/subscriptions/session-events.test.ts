import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribe, subscribeWs, wsClient, type Transport } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const EVENTS = `subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { id seq type data inherited synthetic } }`;
const TURNS = `subscription($id: ID!) { sessionTurns(sessionId: $id) { sessionId kind turn step text callId toolName status reason } }`;
const SEND = `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`;
const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq session { id firstLiveSeq } syntheticEvents { seq type data } } }`;

const create = async (title = 'live') => (await app.ok(`mutation { createSession(input: { title: "${title}" }) { id } }`)).createSession.id as string;
const send = (sessionId: string, text: string) => app.ok(SEND, { i: { sessionId, text } });
const seqs = (items: any[]) => items.map((i) => i.sessionEvents.seq);
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);
const eventCount = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount as number;

describe.each<Transport>(['ws', 'sse'])('sessionEvents over %s', (transport) => {
  it('catches up from the start, then delivers live events in order', async () => {
    const id = await create();
    await app.services.store.append(id, [
      { type: 'session/title', data: { title: 'a' } },
      { type: 'session/title', data: { title: 'b' } },
    ]);
    const sub = subscribe(transport, app.url, EVENTS, { id });
    await sub.count(3);
    await send(id, 'hello live');
    await app.services.host.idle();
    const n = await eventCount(id);
    const items = await sub.count(n);
    await sub.close();
    expect(seqs(items)).toEqual(range(0, n - 1));
    expect(items.at(-1).sessionEvents).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } });
  });

  it('starts after afterSeq', async () => {
    const id = await create();
    await app.services.store.append(id, [
      { type: 'session/title', data: { title: 'a' } },
      { type: 'session/title', data: { title: 'b' } },
    ]);
    const sub = subscribe(transport, app.url, EVENTS, { id, after: 1 });
    expect(seqs(await sub.count(1))).toEqual([2]);
    await sub.close();
  });

  it('rejects an unknown session with SESSION_NOT_FOUND and a bad afterSeq with BAD_USER_INPUT', async () => {
    const missing = subscribe(transport, app.url, EVENTS, { id: 'ses_missing' });
    await waitFor(() => missing.errors.length > 0, { what: 'error' });
    expect(JSON.stringify(missing.errors)).toContain('SESSION_NOT_FOUND');
    await missing.close();
    const id = await create();
    const bad = subscribe(transport, app.url, EVENTS, { id, after: -7 });
    await waitFor(() => bad.errors.length > 0, { what: 'error' });
    expect(JSON.stringify(bad.errors)).toContain('BAD_USER_INPUT');
    await bad.close();
  });
});

describe.each<Transport>(['ws', 'sse'])('sessionListChanges over %s', (transport) => {
  it('says first that it listens (with no session), then names each session as it changes; leaves nothing behind', async () => {
    const sub = subscribe(transport, app.url, `subscription { sessionListChanges { listening session { id title } } }`);
    const [first] = await sub.count(1);
    expect(first).toEqual({ sessionListChanges: { listening: true, session: null } });
    // Listening by then: a session made now reaches it.
    const id = await create('after listening');
    await sub.until((items) => items.some((c) => c.sessionListChanges.session?.id === id), 'the new session');
    expect(sub.items.slice(1).every((c) => c.sessionListChanges.listening === false)).toBe(true);
    expect(sub.errors).toEqual([]);
    await sub.close();
    await waitFor(() => app.services.live.stats().sessions === 0, { what: 'unregistered' });
  });
});

describe('subscriber lifecycle', () => {
  it.each<Transport>(['ws', 'sse'])('a client that goes away over %s leaves nothing behind', async (transport) => {
    const id = await create();
    const subs = [
      subscribe(transport, app.url, EVENTS, { id }),
      subscribe(transport, app.url, TURNS, { id }),
      subscribe(transport, app.url, `subscription { sessionsChanged { id } }`),
    ];
    await subs[0].count(1);
    await waitFor(() => app.services.live.stats().turns === 1 && app.services.live.stats().sessions === 1, { what: 'registered' });
    expect(app.services.live.stats()).toEqual({ watchedSessions: 1, events: 1, turns: 1, sessions: 1, deletions: 0, leasesTaken: 0 });
    await Promise.all(subs.map((s) => s.close()));
    await waitFor(() => app.services.live.stats().events === 0 && app.services.live.stats().turns === 0 && app.services.live.stats().sessions === 0, {
      what: 'cleanup',
    });
    expect(app.services.live.stats()).toEqual({ watchedSessions: 0, events: 0, turns: 0, sessions: 0, deletions: 0, leasesTaken: 0 });
  });

  it('the schema carries the subscription contract of docs/contract.md#graphql-names', async () => {
    const { printedSchema } = await import('../../src/graphql/print-schema.ts');
    // Descriptions (of a field or an argument) aside, on one line.
    const sdl = printedSchema()
      .replace(/"""[\s\S]*?"""/g, '')
      .replace(/\(\s+/g, '(')
      .replace(/\s+\)/g, ')')
      .replace(/\n\s+(?=\w+: )/g, ', ');
    for (const field of [
      'sessionEvents(afterSeq: Int, sessionId: ID!): Event!',
      'sessionTurns(afterSeq: Int, sessionId: ID!): TurnUpdate!',
      'sessionsChanged(startWith: [ID!]): Session!',
    ]) {
      expect(sdl).toContain(field);
    }
  });
});

describe('a fork mid-turn, followed live', () => {
  it('the child subscriber sees the marker and closers first, then the new turn and its model text', async () => {
    const parent = await create('parent');
    const running = new Promise<void>((resolve) => {
      const stop = () => resolve();
      app.turnUpdates.on(parent, (u: any) => u.kind === 'TOOL_RUNNING' && stop());
    });
    await send(parent, 'slow tools\n!call sleep {"ms": 1500}');
    await running;
    const n = await eventCount(parent);
    const { forkSession: f } = await app.ok(FORK, { i: { sessionId: parent, atSeq: n - 1 } });
    expect(f.syntheticEvents.map((e: any) => e.type)).toEqual(['tool/result', 'step/end', 'turn/end']);

    const child = f.session.id;
    const client = wsClient(app.url);
    const events = subscribeWs(app.url, EVENTS, { id: child, after: f.cutSeq }, client);
    const turns = subscribeWs(app.url, TURNS, { id: child }, client);
    const seed = await events.count(4);
    expect(seed.map((i) => i.sessionEvents.type)).toEqual(['session/end-seed', 'tool/result', 'step/end', 'turn/end']);
    expect(seqs(seed)).toEqual(range(f.cutSeq + 1, f.cutSeq + 4));
    expect(seed[0].sessionEvents).toMatchObject({ data: { parentSessionId: parent, cutSeq: f.cutSeq }, inherited: false });
    expect(seed.slice(1).every((i) => i.sessionEvents.synthetic)).toBe(true);
    expect(seed[1].sessionEvents.data.status).toBe('not-started');

    await waitFor(() => app.services.live.stats().turns === 1, { what: 'the turn subscription' });
    await send(child, '!slow 20\nthe child speaks in several words');
    await turns.until((u) => u.some((x) => x.sessionTurns.kind === 'TURN_ENDED'), 'TURN_ENDED');
    await app.services.host.idle();
    const total = await eventCount(child);
    const all = await events.count(total - f.cutSeq - 1);
    expect(seqs(all)).toEqual(range(f.cutSeq + 1, total - 1));
    const own = all.slice(4).map((i) => i.sessionEvents);
    expect(own.map((e) => e.type)).toEqual(['inbox/add', 'inbox/remove', 'turn/start', 'step/start', 'model/message', 'step/end', 'turn/end']);
    const turnNo = own[2].data.turn;
    expect(turnNo).toBe(2);

    const updates = turns.items.map((i) => i.sessionTurns);
    const deltas = updates.filter((u) => u.kind === 'TEXT_DELTA');
    expect(deltas.length).toBeGreaterThan(1); // streamed, not one piece
    expect(deltas.map((u) => u.text).join('')).toBe(own[4].data.text);
    expect(updates[0]).toMatchObject({ kind: 'TURN_STARTED', turn: 2, sessionId: child });
    expect(updates.at(-1)).toMatchObject({ kind: 'TURN_ENDED', turn: 2, reason: 'completed' });
    await client.dispose();
    await app.services.host.idle();
  });
});
