// The typed client (@forkline/client, packages/client) against a real server: HTTP for queries
// and mutations, graphql-ws for subscriptions, error codes surfaced.
import { describe, expect, it } from 'vitest';
import { useClientApp } from '../helpers/client-app.ts';
import { waitFor } from '../helpers/wait.ts';
import {
  createForklineClient,
  CreateSessionDocument,
  ForkSessionDocument,
  ForklineClientError,
  SendMessageDocument,
  SessionDocument,
  SessionEventsLiveDocument,
  SessionsChangedDocument,
  SessionsDocument,
  SessionTurnsDocument,
} from '@forkline/client';

const t = useClientApp();

async function take<T>(it: AsyncIterator<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  while (out.length < n) {
    const r = await it.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

describe('createForklineClient', () => {
  it('queries, mutates and subscribes with typed documents', async () => {
    const changed = t.client.subscribe(SessionsChangedDocument);
    const firstChange = changed.next();
    await waitFor(() => t.app.services.live.stats().sessions === 1, { what: 'sessionsChanged registered' });
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'typed' } });
    expect(createSession).toMatchObject({ title: 'typed', status: 'IDLE', eventCount: 1, parent: null });
    expect((await firstChange).value?.sessionsChanged.id).toBe(createSession.id);
    await changed.return?.();

    const id = createSession.id;
    const events = t.client.subscribe(SessionEventsLiveDocument, { sessionId: id });
    const turns = t.client.subscribe(SessionTurnsDocument, { sessionId: id });
    expect((await take(events, 1)).map((e) => e.sessionEvents.type)).toEqual(['session/title']);
    const firstTurn = turns.next();
    await waitFor(() => t.app.services.live.stats().turns === 1, { what: 'sessionTurns registered' });
    const { sendMessage } = await t.client.mutate(SendMessageDocument, { input: { sessionId: id, text: 'typed hello' } });
    expect(sendMessage.event.seq).toBe(1);
    const live = await take(events, 7);
    expect(live.map((e) => e.sessionEvents.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(live.at(-1)!.sessionEvents).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } });
    expect((await firstTurn).value?.sessionTurns).toMatchObject({ kind: 'TURN_STARTED', turn: 1, sessionId: id });
    await events.return?.();
    await turns.return?.();

    const { sessions } = await t.client.query(SessionsDocument, { first: 5 });
    expect(sessions.edges.map((e) => e.node.id)).toContain(id);
    const { forkSession } = await t.client.mutate(ForkSessionDocument, { input: { sessionId: id, atSeq: 4 } });
    expect(forkSession).toMatchObject({ cutSeq: 4, session: { parent: { id } } });
    expect(forkSession.syntheticEvents.map((e) => e.type)).toEqual(['step/end', 'turn/end']);
  });

  it('surfaces GraphQL error codes from queries, mutations and subscriptions', async () => {
    const { session } = await t.client.query(SessionDocument, { id: 'ses_nope' });
    expect(session).toBeNull();
    const forkErr = await t.client.mutate(ForkSessionDocument, { input: { sessionId: 'ses_nope', atSeq: 0 } }).catch((e) => e);
    expect(forkErr).toBeInstanceOf(ForklineClientError);
    expect(forkErr.code).toBe('SESSION_NOT_FOUND');
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: {} });
    const rangeErr = await t.client.mutate(ForkSessionDocument, { input: { sessionId: createSession.id, atSeq: 99 } }).catch((e) => e);
    expect(rangeErr.code).toBe('SEQ_OUT_OF_RANGE');
    const subErr = await take(t.client.subscribe(SessionEventsLiveDocument, { sessionId: 'ses_nope' }), 1).catch((e) => e);
    expect(subErr).toBeInstanceOf(ForklineClientError);
    expect(subErr.code).toBe('SESSION_NOT_FOUND');
  });

  it('sends the token as a bearer header and reports unreachable servers as NETWORK_ERROR', async () => {
    const seen: string[] = [];
    const spy = createForklineClient({
      url: t.app.url,
      token: 'tok_123',
      fetch: async (input, init) => {
        seen.push(new Headers(init?.headers).get('authorization') ?? '');
        return fetch(input, init);
      },
    });
    await spy.query(SessionsDocument, { first: 1 });
    expect(seen).toEqual(['Bearer tok_123']);
    const down = createForklineClient({ url: 'http://127.0.0.1:9/graphql' });
    const err = await down.query(SessionsDocument).catch((e) => e);
    expect(err.code).toBe('NETWORK_ERROR');
  });
});
