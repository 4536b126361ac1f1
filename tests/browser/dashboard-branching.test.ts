// Branching workflows from the UI in Chromium at a
// desktop and a phone size: Edit on a user message (editMessage), a fork with
// a message and a model, a fan-out of three variants from a turn's end
// (fanOut) shown side by side and live, a failed variant shown as failed; then
// the fork markers on the parent's timeline and conversation, the fork tree
// page, and children labels that name their seq once.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { openPage, sessionIdOf, showDetails, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 15_000 };
let dashboard: Dashboard;
let app: TestApp;
let origin: string;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard());
});
afterAll(() => dashboard?.close());

const idle = () => app.services.host.idle();
const send = (sessionId: string, text: string) => app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
const log = async (id: string) =>
  (await app.services.store.log.page(id, -1, 10_000)).map((e) => ({ seq: e.seq, type: e.type, data: e.data as Record<string, any> }));
const sessionRow = async (id: string) =>
  (await app.ok('query($id: ID!) { session(id: $id) { id title forkedAtSeq parent { id } eventCount } }', { id })).session as {
    id: string;
    title: string;
    forkedAtSeq: number | null;
    parent: { id: string } | null;
    eventCount: number;
  };

/** A session with two answered turns. */
async function twoTurns(title: string) {
  const id = (await app.ok('mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }', { i: { title } })).createSession.id as string;
  for (const text of ['first question', 'second question']) {
    await send(id, text);
    await idle();
  }
  return id;
}

/** The page has no sideways scroll: nothing is wider than the viewport. */
async function expectNoSidewaysScroll(page: Page) {
  const { scroll, width } = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, width: window.innerWidth }));
  expect(scroll).toBeLessThanOrEqual(width);
}

const SIZES = [
  { name: 'desktop', viewport: { width: 1440, height: 900 } },
  { name: 'phone', viewport: { width: 390, height: 844 } },
];

describe.each(SIZES)('branching from the dashboard ($name)', ({ name, viewport }) => {
  it('Edit on a user message re-runs it in a new session; the original is unchanged', async () => {
    const parent = await twoTurns(`edit ${name}`);
    const before = await log(parent);
    const secondAdd = before.find((e) => e.type === 'inbox/add' && e.data.text === 'second question')!;
    const { page, errors } = await openPage(dashboard.browser, { viewport });
    await page.goto(`${origin}/sessions/${parent}`);

    await page.getByRole('button', { name: `Edit and re-run #${secondAdd.seq}`, exact: true }).click();
    const dialog = page.getByRole('dialog', { name: `Edit message #${secondAdd.seq}` });
    const text = dialog.getByLabel('Edited message');
    expect(await text.inputValue()).toBe('second question');
    await text.fill('second question, edited');
    await dialog.getByRole('button', { name: 'Edit and re-run', exact: true }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(parent), TIMEOUT);
    const child = sessionIdOf(page);

    // The child answers the edited text in its conversation.
    await page.locator('.msg.assistant .msg-text', { hasText: 'Echo: second question, edited' }).waitFor(TIMEOUT);
    const row = await sessionRow(child);
    expect(row).toMatchObject({ forkedAtSeq: secondAdd.seq - 1, parent: { id: parent } });
    const childLog = await log(child);
    expect(childLog.filter((e) => e.type === 'inbox/add').map((e) => e.data.text)).toEqual(['first question', 'second question, edited']);
    expect(await log(parent)).toEqual(before);
    await expectNoSidewaysScroll(page);

    // Edit with two variants: a fan-out right before the input, shown side by side.
    await page.goto(`${origin}/sessions/${parent}`);
    await page.getByRole('button', { name: `Edit and re-run #${secondAdd.seq}`, exact: true }).click();
    const fan = page.getByRole('dialog', { name: `Edit message #${secondAdd.seq}` });
    await fan.getByLabel('Edited message').fill('rephrased once');
    await fan.getByRole('button', { name: 'Add variant' }).click();
    await fan.getByLabel('Edited message, variant 2').fill('rephrased twice');
    await fan.getByRole('button', { name: 'Fan out (2)', exact: true }).click();
    await page.waitForURL(`${origin}/sessions/${parent}/forks/${secondAdd.seq - 1}`, TIMEOUT);
    const cards = page.getByTestId('variant-card');
    // The first edit's child was forked there too: three children, oldest first.
    await expect.poll(() => cards.evaluateAll((els) => els.map((el) => el.getAttribute('data-state'))), TIMEOUT).toEqual(['answered', 'answered', 'answered']);
    expect(await cards.nth(0).getAttribute('data-session-id')).toBe(child);
    expect(await cards.nth(1).getByTestId('variant-answer').textContent()).toContain('Echo: rephrased once');
    expect(await cards.nth(2).getByTestId('variant-answer').textContent()).toContain('Echo: rephrased twice');
    // The edited session and both variants were all forked at the same seq.
    expect(await page.locator('h1').textContent()).toBe(`3 children forked at event ${secondAdd.seq - 1}`);
    expect(await log(parent)).toEqual(before);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('Fork here takes a message and a model', async () => {
    const parent = await twoTurns(`fork ${name}`);
    const { eventCount } = await sessionRow(parent);
    const at = eventCount - 1;
    const { page, errors } = await openPage(dashboard.browser, { viewport });
    await page.goto(`${origin}/sessions/${parent}`);
    await page.getByRole('button', { name: `Fork here at event ${at}`, exact: true }).click();
    const dialog = page.getByRole('dialog', { name: `Fork at event ${at}` });
    await dialog.getByLabel('Message to send in the fork (optional)').fill('hello from the fork');
    await dialog.getByLabel('Provider').selectOption('scripted');
    await dialog.getByLabel('Model', { exact: true }).fill('other-model');
    const box = await dialog.boundingBox();
    expect(box!.x).toBeGreaterThanOrEqual(0);
    expect(box!.x + box!.width).toBeLessThanOrEqual(viewport.width);
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click();
    await page.waitForURL((url) => url.pathname.startsWith('/sessions/') && !url.pathname.includes(parent), TIMEOUT);
    const child = sessionIdOf(page);
    await page.locator('.msg.assistant .msg-text', { hasText: 'Echo: hello from the fork' }).waitFor(TIMEOUT);

    const childLog = await log(child);
    expect(childLog.find((e) => e.type === 'session/model' && e.seq > at)?.data).toMatchObject({ provider: 'scripted', model: 'other-model' });
    expect(app.models.scripted.lastRequest).toMatchObject({ provider: 'scripted', model: 'other-model' });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('fans out three variants from a turn: side by side, live, a failed one failed; markers and the fork tree follow', async () => {
    const parent = await twoTurns(`fan-out ${name}`);
    const parentLog = await log(parent);
    const firstEnd = parentLog.find((e) => e.type === 'turn/end')!;
    const { page, errors } = await openPage(dashboard.browser, { viewport });
    await page.goto(`${origin}/sessions/${parent}`);

    await page.getByRole('button', { name: 'Branch from turn 1', exact: true }).click();
    const dialog = page.getByRole('dialog', { name: 'Branch from turn 1' });
    await dialog.getByLabel('Message to send in the branch (optional)').fill('alpha');
    await dialog.getByRole('button', { name: 'Add variant' }).click();
    await dialog.getByLabel('Message to send in the branch (optional), variant 2').fill('!fail the provider is down');
    await dialog.getByRole('button', { name: 'Add variant' }).click();
    await dialog.getByLabel('Message to send in the branch (optional), variant 3').fill('gamma');
    await dialog.getByLabel('Provider, variant 3').selectOption('scripted');
    await dialog.getByLabel('Model, variant 3').fill('third-model');
    await dialog.getByRole('button', { name: 'Fan out (3)', exact: true }).click();

    // The children of the cut, side by side.
    await page.waitForURL(`${origin}/sessions/${parent}/forks/${firstEnd.seq}`, TIMEOUT);
    const cards = page.getByTestId('variant-card');
    await expect.poll(() => cards.count(), TIMEOUT).toBe(3);
    const card = (i: number) => cards.nth(i);
    await expect.poll(() => card(0).getAttribute('data-state'), TIMEOUT).toBe('answered');
    await expect.poll(() => card(1).getAttribute('data-state'), TIMEOUT).toBe('failed');
    await expect.poll(() => card(2).getAttribute('data-state'), TIMEOUT).toBe('answered');
    expect(await card(0).getByTestId('variant-answer').textContent()).toContain('Echo: alpha');
    expect(await card(1).getByTestId('variant-error').textContent()).toContain('the provider is down');
    expect(await card(1).locator('.badge').textContent()).toBe('failed');
    expect(await card(2).getByTestId('variant-answer').textContent()).toContain('Echo: gamma');
    expect(await card(2).locator('.variant-meta').textContent()).toContain('scripted/third-model');
    const ids = await cards.evaluateAll((els) => els.map((el) => el.getAttribute('data-session-id')!));
    const third = await log(ids[2]);
    expect(third.find((e) => e.type === 'session/model' && e.seq > firstEnd.seq)?.data).toMatchObject({ model: 'third-model' });

    // Side by side on a desktop, stacked on a phone; never wider than the screen.
    const boxes = await Promise.all([0, 1, 2].map(async (i) => (await card(i).boundingBox())!));
    if (viewport.width >= 1000) expect(boxes[1].y).toBe(boxes[0].y);
    else expect(boxes[1].y).toBeGreaterThan(boxes[0].y);
    for (const b of boxes) expect(b.x + b.width).toBeLessThanOrEqual(viewport.width);
    await expectNoSidewaysScroll(page);

    // Live: a variant's next answer streams in, then shows as its answer, without a reload. A short answer (12 words,
    // about 1 s) and the page's reads of the fork point held 1.5 s, as on a loaded machine: a card that followed a
    // variant's turns only once a read showed it running saw none of it, or its end only; each card follows its
    // variant's turns from the start, so the text streams in from its first word.
    await page.evaluate(() => {
      const w = window as unknown as { __live: string[] };
      w.__live = [];
      new MutationObserver(() => {
        const text = document.querySelector('[data-testid="variant-card"] [data-testid="variant-live"] .msg-text')?.textContent;
        if (text && text !== w.__live.at(-1)) w.__live.push(text);
      }).observe(document.querySelector('.variants-grid')!, { subtree: true, childList: true, characterData: true });
    });
    let holdReads = true;
    await page.route('**/graphql*', async (route) => {
      const req = route.request();
      if (holdReads && (req.postData() ?? req.url()).includes('DashboardForkPoint')) await new Promise((r) => setTimeout(r, 1_500));
      await route.continue();
    });
    await send(ids[0], '!slow 80\nalpha again, word by word, slowly enough to watch it arrive');
    await expect
      .poll(
        () =>
          card(0)
            .getByTestId('variant-answer')
            .textContent({ timeout: 200 })
            .catch(() => ''),
        TIMEOUT,
      )
      .toContain('Echo: alpha again, word by word, slowly enough to watch it arrive');
    const live = await page.evaluate(() => (window as unknown as { __live: string[] }).__live);
    expect(live.length).toBeGreaterThan(1); // streamed, not only shown once stored
    expect(live[0]).toMatch(/^Echo:/);
    expect(live.at(-1)).toContain('slowly enough to watch it arrive');
    holdReads = false;
    expect(await card(0).getAttribute('data-state')).toBe('answered');
    // A failed variant that answers later is answered, not failed.
    await send(ids[1], 'recovered');
    await expect.poll(() => card(1).getAttribute('data-state'), TIMEOUT).toBe('answered');

    // A fork of a variant: the third generation, for the tree.
    const grandchild = (
      await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: ids[2], title: 'grandchild' } })
    ).forkSession.session.id as string;

    // The parent marks where its children were forked: on the timeline row and in the conversation.
    await page.goto(`${origin}/sessions/${parent}`);
    const timelineLink = page.locator(`table.timeline tr[data-seq="${firstEnd.seq}"] [data-testid="timeline-forks"]`);
    await expect.poll(() => timelineLink.textContent(), TIMEOUT).toContain('3 forks');
    expect(await timelineLink.getAttribute('href')).toBe(`/sessions/${parent}/forks/${firstEnd.seq}`);
    const marker = page.getByTestId('fork-point');
    await expect.poll(() => marker.textContent(), TIMEOUT).toContain(`3 forks at #${firstEnd.seq}`);
    for (const id of ids) expect(await marker.locator(`a[href="/sessions/${id}"]`).count()).toBe(1);
    // The marker sits right after the turn it was forked at, before the next input.
    const order = await page
      .locator('ol.conversation > li')
      .evaluateAll((els) =>
        els
          .map((el) =>
            el.classList.contains('fork-point-row')
              ? 'marker'
              : el.classList.contains('turn-end')
                ? `end ${el.getAttribute('data-turn')}`
                : el.classList.contains('user')
                  ? 'user'
                  : '',
          )
          .filter(Boolean),
      );
    expect(order.slice(order.indexOf('end 1'), order.indexOf('end 1') + 3)).toEqual(['end 1', 'marker', 'user']);

    // The header's Children menu names each child once with its seq ("… · fork @N", never "@N @N").
    await showDetails(page);
    await page.getByRole('button', { name: /^Children \(\d+\)$/ }).click();
    const childItems = await page.getByRole('menu', { name: 'Children' }).getByRole('menuitem').allTextContents();
    expect(childItems.length).toBeGreaterThan(0);
    for (const item of childItems) expect(item).not.toMatch(/@(\d+) @\1/);
    await page.keyboard.press('Escape');

    // The fork tree: three generations, children grouped under the seq they were forked at.
    await page.getByRole('link', { name: 'Fork tree' }).click();
    await page.waitForURL(`${origin}/sessions/${parent}/family`, TIMEOUT);
    const tree = page.getByRole('navigation', { name: 'Fork tree' });
    const nested = tree.locator(
      `li.family-node[data-session-id="${parent}"] li.family-fork-point[data-fork-seq="${firstEnd.seq}"] li.family-node[data-session-id="${ids[2]}"] li.family-node[data-session-id="${grandchild}"]`,
    );
    await nested.waitFor(TIMEOUT);
    expect(await tree.locator(`li.family-fork-point[data-fork-seq="${firstEnd.seq}"] > .fork-point-link`).textContent()).toBe(`@${firstEnd.seq} · 3 forks`);
    expect(await tree.locator('li.family-node').count()).toBe(5);
    await expectNoSidewaysScroll(page);
    // Live: a new fork appears in the tree.
    await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: parent, atSeq: 0, title: 'late fork' } });
    await expect.poll(() => tree.locator('li.family-node').count(), TIMEOUT).toBe(6);
    await page.screenshot({ path: `tests/artifacts/dashboard-fork-tree-${name}.png` });

    await page.goto(`${origin}/sessions/${parent}/forks/${firstEnd.seq}`);
    await expect.poll(() => cards.count(), TIMEOUT).toBe(3);
    await page.screenshot({ path: `tests/artifacts/dashboard-fan-out-${name}.png`, fullPage: true });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.screenshot({ path: `tests/artifacts/dashboard-fan-out-${name}-dark.png`, fullPage: true });
    expect(errors).toEqual([]);
    await page.close();
  });
});
