// A fan-out's cards in Chromium when the request's text budget cut what they
// show (FORKLINE_PAGE_BYTES characters of answers, inputs and error reports per
// request, docs/api.md "Texts in one request"): a variant's message, its
// error and its answer each say they are cut, and link the event that holds
// them whole. The old cards showed a cut message or error as if it were whole,
// and an answer cut to nothing as "(tool calls only)".
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
const PAGE_BYTES = 8 * 1024;
/** Each big text: past the budget on its own. */
const BIG = 20_000;
const scope = { tenant: 'local' };
let dashboard: Dashboard;
let app: TestApp;
let origin: string;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard({ pageBytes: PAGE_BYTES }));
});
afterAll(() => dashboard?.close());

describe("a fan-out's cards on texts the server cut", () => {
  it("say so under the variant's message, error and answer, with a link to each one's event", async () => {
    const store = app.services.store;
    const parent = (await store.createSession(scope, { title: 'cut parent' })).id;
    await store.append(parent, textTurn(1, 'the question', 'the first answer'));
    const at = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: parent })).session.eventCount - 1;
    const failed = (await store.fork(scope, parent, at)).session.id;
    await store.append(failed, [
      { type: 'inbox/add', data: { inputId: 'in_big', text: `message ${'m'.repeat(BIG)}` } },
      { type: 'inbox/remove', data: { inputId: 'in_big', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 2, inputId: 'in_big' } },
      { type: 'step/start', data: { turn: 2, step: 1 } },
      { type: 'plugin/agent/error', data: { turn: 2, step: 1, message: `error ${'e'.repeat(BIG)}` } },
      { type: 'step/end', data: { turn: 2, step: 1, reason: 'failed' } },
      { type: 'turn/end', data: { turn: 2, reason: 'failed' } },
    ]);
    const answered = (await store.fork(scope, parent, at)).session.id;
    await store.append(answered, textTurn(2, 'a short one', `answer ${'a'.repeat(BIG)}`));
    const seqs = async (id: string, type: string) =>
      (
        await app.ok('query($id: ID!, $t: [String!]) { session(id: $id) { events(last: 10, types: $t) { edges { node { seq } } } } }', {
          id,
          t: [type],
        })
      ).session.events.edges.map((e: { node: { seq: number } }) => e.node.seq);
    const [inputSeq] = (await seqs(failed, 'inbox/add')).filter((s: number) => s > at);
    const [errorSeq] = await seqs(failed, 'plugin/agent/error');
    const answerSeq = (await seqs(answered, 'model/message')).at(-1);

    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${origin}/sessions/${parent}/forks/${at}`);
    const cards = page.getByTestId('variant-card');
    await expect.poll(() => cards.count(), TIMEOUT).toBe(2);
    const card = (id: string) => page.locator(`[data-testid="variant-card"][data-session-id="${id}"]`);
    await expect.poll(() => card(failed).getAttribute('data-state'), TIMEOUT).toBe('failed');
    await expect.poll(() => card(answered).getAttribute('data-state'), TIMEOUT).toBe('answered');

    // Each big text is past the budget by itself: each comes cut, and says where it is whole.
    const note = async (id: string, testId: string) => {
      const n = card(id).getByTestId(testId);
      await n.waitFor(TIMEOUT);
      return { text: (await n.textContent())!.trim(), href: await n.getByRole('link').getAttribute('href') };
    };
    expect(await note(failed, 'variant-input-cut')).toEqual({ text: `… cut here (event #${inputSeq})`, href: `/sessions/${failed}#seq-${inputSeq}` });
    expect(await note(failed, 'variant-error-cut')).toEqual({ text: `… cut here (event #${errorSeq})`, href: `/sessions/${failed}#seq-${errorSeq}` });
    expect(await note(answered, 'variant-answer-cut')).toEqual({
      text: `… cut here: ${(BIG + 7).toLocaleString('en-US')} characters in all (event #${answerSeq})`,
      href: `/sessions/${answered}#seq-${answerSeq}`,
    });
    // What came is the texts' beginnings, the budget's worth at most; an answer cut to nothing is not "tool calls only".
    const shown = await page.evaluate(() =>
      [...document.querySelectorAll('.variant-input, .variant-error, .variant-answer .msg-text')].map((el) => el.textContent ?? ''),
    );
    expect(shown.join('').length).toBeLessThan(PAGE_BYTES + 500);
    expect(await card(answered).textContent()).not.toContain('(tool calls only)');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});
