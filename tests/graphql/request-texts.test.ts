// One request reads its answers' texts (and waiting inputs', error reports')
// within one budget, FORKLINE_PAGE_BYTES characters (docs/operations.md
// "Memory and time"), whatever the query's shape: a page of sessions, aliases.
// A text past it comes cut, and says so; the next request has a budget of its
// own, and so does each payload of a subscription (its context lives as long
// as it does).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { subscribeWs, subscriptionsOpened, openSubscriptions } from '../helpers/subscribe.ts';

const PAGE_BYTES = 4096;
const ANSWER = 1500;
const SESSIONS = 3;
const scope = { tenant: 'local' };
let app: TestApp;
const ids: string[] = [];

const textOf = (i: number, chars: number) => `answer ${i} `.padEnd(chars, String.fromCharCode(97 + i));
/** Turn `turn` answering answer `i` of `chars` characters. */
const answer = (turn: number, i: number, chars: number) => textTurn(turn, 'q', textOf(i, chars));

beforeAll(async () => {
  app = await startTestApp({ pageBytes: PAGE_BYTES });
  for (let i = 0; i < SESSIONS; i++) {
    const { id } = await app.services.store.createSession(scope, { title: `texts ${i}` });
    await app.services.store.append(id, textTurn(1, textOf(100 + i, ANSWER), textOf(i, ANSWER)));
    ids.push(id);
  }
}, 60_000);
afterAll(() => app?.close());

type Answer = { text: string; textTruncated: boolean; textLength?: number };

describe('Answer.text within a request', () => {
  it('a page of sessions asking for each answer twice reads FORKLINE_PAGE_BYTES characters in all: the rest come cut, flagged', async () => {
    const d = await app.ok(
      'query { sessions(first: 10) { edges { node { id lastAnswer { text textTruncated textLength } again: lastAnswer { text textTruncated } } } } }',
    );
    const nodes = d.sessions.edges.map((e: { node: { id: string; lastAnswer: Answer; again: Answer } }) => e.node);
    expect(nodes).toHaveLength(SESSIONS);
    const texts: Answer[] = [];
    for (const n of nodes) {
      const i = ids.indexOf(n.id);
      expect(n.lastAnswer.textLength).toBe(ANSWER);
      for (const a of [n.lastAnswer, n.again]) {
        expect(textOf(i, ANSWER).startsWith(a.text)).toBe(true);
        expect(a.textTruncated).toBe(a.text.length < ANSWER);
        texts.push(a);
      }
    }
    // Six answers of 1,500 characters, a budget of 4,096: the budget, no more.
    expect(texts.reduce((n, a) => n + a.text.length, 0)).toBe(PAGE_BYTES);
    expect(texts.filter((a) => a.textTruncated).length).toBeGreaterThanOrEqual(4);
    // The next request has a budget of its own.
    const one = await app.ok('query($id: ID!) { session(id: $id) { lastAnswer { text textTruncated } } }', { id: ids[0] });
    expect(one.session.lastAnswer).toEqual({ text: textOf(0, ANSWER), textTruncated: false });
  });

  it("turns' inputs (a session's last turn, a list of turns) share the budget: past it they come cut, flagged", async () => {
    const d = await app.ok('query { sessions(first: 10) { edges { node { id lastTurn { input inputTruncated } turns { turn input inputTruncated } } } } }');
    const texts: Array<{ text: string; truncated: boolean; whole: string }> = [];
    for (const { node } of d.sessions.edges) {
      const whole = textOf(100 + ids.indexOf(node.id), ANSWER);
      for (const t of [node.lastTurn, ...node.turns]) texts.push({ text: t.input ?? '', truncated: t.inputTruncated, whole });
    }
    expect(texts.length).toBeGreaterThanOrEqual(SESSIONS + 1);
    for (const t of texts) {
      expect(t.whole.startsWith(t.text)).toBe(true);
      expect(t.truncated).toBe(t.text.length < ANSWER);
    }
    // Six inputs of 1,500 characters asked for, a budget of 4,096 (a list counts its inputs' stored bytes): no more than it.
    expect(texts.reduce((n, t) => n + t.text.length, 0)).toBeLessThanOrEqual(PAGE_BYTES);
    expect(texts.some((t) => t.truncated)).toBe(true);
  });

  it('each payload of a subscription has a budget of its own: answers that together pass it each come whole', async () => {
    const before = await openSubscriptions(app.url);
    const sub = subscribeWs(app.url, 'subscription { sessionsChanged { id lastAnswer { text textTruncated } } }');
    try {
      await subscriptionsOpened(app.url, before, 1);
      const big = 3000;
      for (let n = 0; n < 3; n++) {
        const seen = sub.items.length;
        await app.services.store.append(ids[1], answer(2 + n, 10 + n, big));
        await sub.until((items) => items.length > seen && items.at(-1).sessionsChanged.lastAnswer?.text === textOf(10 + n, big), `answer ${n}`);
      }
      const payloads = sub.items.map((i) => i.sessionsChanged.lastAnswer as Answer);
      expect(payloads.length).toBeGreaterThanOrEqual(3);
      // 9,000 characters over the subscription, each payload's within the budget: none cut.
      for (const a of payloads) expect(a.textTruncated).toBe(false);
    } finally {
      await sub.close();
    }
  });
});
