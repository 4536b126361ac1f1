// sessionsTurns: several sessions' turn updates in one subscription (one of the
// token's places): each session's whole, from its afterSeq; only the caller's
// tenant's sessions (another's is not found and nothing is followed); 1–50
// distinct ids; its cost counts each; its end ends every session's relay
// subscriber.
import { parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp, TOKEN_A } from '../helpers/two-tenants.ts';
import { subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { queryCost } from '../../src/graphql/query-cost.ts';
import { schema } from '../../src/graphql/schema.ts';
import { MAX_FOLLOWED_SESSIONS } from '../../src/graphql/types/subscriptions.ts';

const TURNS = `subscription($s: [SessionTurnsFromInput!]!) { sessionsTurns(sessions: $s) { sessionId kind seq turn step text reason } }`;

let app: TestApp;
beforeAll(async () => {
  app = await startTwoTenantApp();
});
afterAll(() => app?.close());

async function ok(query: string, variables: Record<string, unknown>, headers: Record<string, string>) {
  const r = await app.gql(query, variables, headers);
  if (r.errors?.length) throw new Error(JSON.stringify(r.errors));
  return r.data;
}
const create = async (title: string, as = A) =>
  (await ok('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title }, as)).createSession.id as string;
const send = (sessionId: string, text: string) => ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } }, A);
const client = () => wsClient(app.url, { connectionParams: { authorization: `Bearer ${TOKEN_A}` } });
const answers = async (id: string) =>
  (await app.services.store.log.page(id, -1, 1000)).filter((e) => e.type === 'model/message').map((e) => (e.data as { text: string }).text);

describe('sessionsTurns', () => {
  it("follows several sessions on one subscription: each one's turns whole, in order, told apart by sessionId", async () => {
    const ids = [await create('one'), await create('two'), await create('three')];
    await send(ids[0], 'answered before the subscription');
    await app.services.host.idle();
    const ws = client();
    // The first from its start (its stored turn replayed), the others live.
    const sub = subscribeWs(app.url, TURNS, { s: [{ sessionId: ids[0], afterSeq: -1 }, { sessionId: ids[1] }, { sessionId: ids[2], afterSeq: 0 }] }, ws);
    await waitFor(() => app.services.live.stats().turns === 3, { what: 'three relay subscribers' });
    await send(ids[1], '!slow 20\nsecond streams word by word');
    await send(ids[2], 'third answers');
    const ended = (id: string, n: number) => (items: any[]) =>
      items.filter((i) => i.sessionsTurns.sessionId === id && i.sessionsTurns.kind === 'TURN_ENDED').length >= n;
    await sub.until((items) => ended(ids[0], 1)(items) && ended(ids[1], 1)(items) && ended(ids[2], 1)(items), 'every turn ended');
    await app.services.host.idle();
    for (const id of ids) {
      const mine = sub.items.map((i) => i.sessionsTurns).filter((u) => u.sessionId === id);
      expect(mine[0]).toMatchObject({ kind: 'TURN_STARTED', turn: 1 });
      expect(mine.at(-1)).toMatchObject({ kind: 'TURN_ENDED', reason: 'completed' });
      expect(
        mine
          .filter((u) => u.kind === 'TEXT_DELTA')
          .map((u) => u.text)
          .join(''),
      ).toBe((await answers(id)).join(''));
    }
    const streamed = sub.items.filter((i) => i.sessionsTurns.sessionId === ids[1] && i.sessionsTurns.kind === 'TEXT_DELTA');
    expect(streamed.length).toBeGreaterThan(1); // live deltas, not only the stored answer
    await sub.close();
    // Its end ends every session's relay subscriber.
    await waitFor(() => app.services.live.stats().turns === 0, { what: 'the relay subscribers gone' });
    await ws.dispose();
  });

  it("refuses another tenant's session (not found, nothing followed), a session twice, none, and more than 50", async () => {
    const mine = await create('mine');
    const theirs = await create('theirs', B);
    const ws = client();
    const refused = async (sessions: unknown[]) => {
      const sub = subscribeWs(app.url, TURNS, { s: sessions }, ws);
      await waitFor(() => sub.errors.length > 0 || sub.completed, { what: 'an answer' });
      expect(sub.items).toEqual([]);
      return JSON.stringify(sub.errors);
    };
    expect(await refused([{ sessionId: mine }, { sessionId: theirs }])).toContain('SESSION_NOT_FOUND');
    expect(app.services.live.stats().turns).toBe(0);
    expect(await refused([{ sessionId: mine }, { sessionId: mine, afterSeq: 0 }])).toContain('BAD_USER_INPUT');
    expect(await refused([])).toContain('BAD_USER_INPUT');
    const many = Array.from({ length: MAX_FOLLOWED_SESSIONS + 1 }, (_, i) => ({ sessionId: `s${i}` }));
    expect(await refused(many)).toContain('BAD_USER_INPUT');
    await ws.dispose();
  });

  it('costs each session it follows', () => {
    const cost = (n: number) => queryCost(schema, parse(TURNS), undefined, { s: Array.from({ length: n }, (_, i) => ({ sessionId: `s${i}` })) });
    expect(cost(50)).toBe(50 * cost(1));
  });
});
