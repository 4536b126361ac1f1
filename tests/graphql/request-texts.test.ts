// One request reads its answers' texts (and waiting inputs', error reports')
// within one budget, FORKLINE_PAGE_BYTES characters (docs/operations.md
// "Memory and time"), whatever the query's shape: a page of sessions, aliases.
// A text past it comes cut, and says so; the next request has a budget of its
// own, and so does each payload of a subscription (its context lives as long
// as it does). A text whose length came with its event is one statement (the
// statements on "Event" are taken from the service's pool, onQuery), and two
// texts of one object (a turn's input and error) are two reads, each its own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { eventStatements } from '../helpers/event-statements.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { subscribeWs, subscriptionsOpened, openSubscriptions } from '../helpers/subscribe.ts';

const PAGE_BYTES = 4096;
const ANSWER = 1500;
const SESSIONS = 3;
const scope = { tenant: 'local' };
let app: TestApp;
const ids: string[] = [];
const statements = eventStatements();

const textOf = (i: number, chars: number) => `answer ${i} `.padEnd(chars, String.fromCharCode(97 + i));
/** Turn `turn` answering answer `i` of `chars` characters. */
const answer = (turn: number, i: number, chars: number) => textTurn(turn, 'q', textOf(i, chars));

beforeAll(async () => {
  app = await startTestApp({ pageBytes: PAGE_BYTES, onQuery: statements.onQuery });
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

const run = (query: string, variables: Record<string, unknown>) => statements.run(app, query, variables);

/** A session whose one turn took `input` and failed with an error report `message`. */
async function failedTurn(input: string, message: string): Promise<string> {
  const { id } = await app.services.store.createSession(scope, { title: 'failed' });
  await app.services.store.append(id, [
    { type: 'inbox/add', data: { inputId: 'in_f', text: input } },
    { type: 'inbox/remove', data: { inputId: 'in_f', reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId: 'in_f' } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
    { type: 'plugin/agent/error', data: { turn: 1, step: 1, message } },
    { type: 'step/end', data: { turn: 1, step: 1, reason: 'failed' } },
    { type: 'turn/end', data: { turn: 1, reason: 'failed' } },
  ]);
  return id;
}

describe('a text whose length came with its event', () => {
  it('lastAnswer { text } is two statements: the answer found with its length, then its text; textLength alone reads no text', async () => {
    const q = 'query($id: ID!) { session(id: $id) { lastAnswer { text textTruncated textLength } } }';
    await run(q, { id: ids[0] }); // the session's lineage cached: what follows counts the log's reads only
    const { data, sql } = await run(q, { id: ids[0] });
    expect(data.session.lastAnswer).toEqual({ text: textOf(0, ANSWER), textTruncated: false, textLength: ANSWER });
    // The old code: the answer without its text, then the text's length, then the text (three).
    expect(sql, sql.join('\n')).toHaveLength(2);
    const alone = await run('query($id: ID!) { session(id: $id) { lastAnswer { textLength } } }', { id: ids[0] });
    expect(alone.data.session.lastAnswer).toEqual({ textLength: ANSWER });
    expect(alone.sql, alone.sql.join('\n')).toHaveLength(1);
  });

  it("a turn's input and error are each one statement more than the turn", async () => {
    const id = await failedTurn('the question', 'the provider is down');
    const q = (fields: string) => `query($id: ID!) { session(id: $id) { lastTurn { ${fields} } } }`;
    await run(q('turn'), { id });
    const turn = await run(q('turn reason'), { id });
    const texts = await run(q('turn reason input inputTruncated error errorTruncated'), { id });
    expect(texts.data.session.lastTurn).toEqual({
      turn: 1,
      reason: 'failed',
      input: 'the question',
      inputTruncated: false,
      error: 'the provider is down',
      errorTruncated: false,
    });
    // Each text: its event found with the text's length, then the text (the old code read the length apart: six).
    expect(texts.sql.length, texts.sql.join('\n')).toBe(turn.sql.length + 4);
  });

  it('fields resolving at once never pass the budget together: a page, aliases, inputs and errors', async () => {
    const failed = await Promise.all([0, 1, 2].map((i) => failedTurn(textOf(20 + i, ANSWER), textOf(30 + i, ANSWER))));
    const fields = 'lastAnswer { text textTruncated } lastTurn { input inputTruncated error errorTruncated } again: lastTurn { error errorTruncated }';
    const d = await app.ok(`query { sessions(first: 50) { edges { node { id ${fields} } } } }`);
    const texts: Array<{ text: string; truncated: boolean }> = [];
    for (const { node } of d.sessions.edges) {
      if (node.lastAnswer) texts.push({ text: node.lastAnswer.text, truncated: node.lastAnswer.textTruncated });
      for (const t of [node.lastTurn, node.again]) {
        if (!t) continue;
        if (t.input != null) texts.push({ text: t.input, truncated: t.inputTruncated });
        if (t.error != null) texts.push({ text: t.error, truncated: t.errorTruncated });
      }
    }
    expect(d.sessions.edges.filter((e: { node: { id: string } }) => failed.includes(e.node.id))).toHaveLength(3);
    // Far more than the budget asked for: it, no more, and the rest flagged.
    expect(texts.reduce((n, t) => n + t.text.length, 0)).toBe(PAGE_BYTES);
    expect(texts.filter((t) => t.truncated).length).toBeGreaterThan(texts.length / 2);
  });
});

describe('two texts of one object', () => {
  it("a turn's input and its error are each its own text, in one query and in a list of turns", async () => {
    const id = await failedTurn('what time is it?', 'the model refused: rate limited');
    const d = await app.ok(
      'query($id: ID!) { session(id: $id) { lastTurn { error errorTruncated input inputTruncated inputSeq errorSeq } turns { input error } } }',
      { id },
    );
    const { inputSeq, errorSeq, ...texts } = d.session.lastTurn;
    expect(texts).toEqual({ error: 'the model refused: rate limited', errorTruncated: false, input: 'what time is it?', inputTruncated: false });
    // Where each whole text is: the turn's inbox/add, and its error report four events on.
    expect(errorSeq - inputSeq).toBe(4);
    const at = async (seq: number) =>
      (
        await app.ok('query($id: ID!, $after: Int) { session(id: $id) { events(afterSeq: $after, first: 1) { edges { node { type data } } } } }', {
          id,
          after: seq - 1,
        })
      ).session.events.edges[0].node;
    expect(await at(inputSeq)).toMatchObject({ type: 'inbox/add', data: { text: 'what time is it?' } });
    expect(await at(errorSeq)).toMatchObject({ type: 'plugin/agent/error', data: { message: 'the model refused: rate limited' } });
    expect(d.session.turns).toEqual([{ input: 'what time is it?', error: 'the model refused: rate limited' }]);
  });
});
