// The dashboard's addresses: a jump puts its event in
// the address (`#seq-N`), so Back and Forward walk the jumps and a reload or
// a shared link opens there; a link that cannot be followed says so (an
// unknown session, an event past the end, a malformed hash, a path with no
// page) instead of quietly showing something else.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { appendTurns, eventCountOf, openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TIMEOUT = { timeout: 10_000 };
let dashboard: Dashboard;
let app: TestApp;
let origin: string;
let id: string;
let length: number;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard());
  id = (await app.services.store.createSession({ tenant: 'local' }, { title: 'Links' })).id;
  await appendTurns(app, id, 1, 40);
  length = await eventCountOf(app, id);
}, 60_000);
afterAll(() => dashboard?.close());

const target = (page: Page) => page.locator('table.timeline tr[aria-current="location"]');
const highlighted = (page: Page) =>
  target(page)
    .getAttribute('data-seq', { timeout: 500 })
    .catch(() => null);
const badLink = (page: Page) => page.getByTestId('bad-link');

describe('dashboard addresses', () => {
  it('a jump puts its seq in the address; Back and Forward walk the jumps; a reload opens there', async () => {
    const { page, errors } = await openPage(dashboard.browser);
    await page.goto(`${origin}/sessions/${id}`);
    await page.locator(`table.timeline tr[data-seq="${length - 1}"]`).waitFor(TIMEOUT);
    const jumpTo = async (seq: number) => {
      await page.getByLabel('Seq to jump to').fill(String(seq));
      await page.getByRole('button', { name: 'Jump to seq' }).click();
    };

    await jumpTo(12);
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('#seq-12');
    await expect.poll(() => highlighted(page), TIMEOUT).toBe('12');
    await jumpTo(200);
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('#seq-200');
    await expect.poll(() => highlighted(page), TIMEOUT).toBe('200');
    await page.getByRole('button', { name: 'Jump to start' }).click();
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('#seq-0');

    await page.goBack();
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('#seq-200');
    await expect.poll(() => highlighted(page), TIMEOUT).toBe('200');
    await page.goBack();
    await expect.poll(() => highlighted(page), TIMEOUT).toBe('12');
    await page.goForward();
    await expect.poll(() => highlighted(page), TIMEOUT).toBe('200');
    // Back to the plain address: the latest events again, nothing highlighted.
    await page.goBack();
    await page.goBack();
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('');
    await page.locator(`table.timeline tr[data-seq="${length - 1}"]`).waitFor(TIMEOUT);
    await expect.poll(() => target(page).count(), TIMEOUT).toBe(0);
    expect(new URL(page.url()).pathname).toBe(`/sessions/${id}`);

    // "Jump to latest" is the plain address; a reload of a jump's address opens at that event.
    await jumpTo(77);
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('#seq-77');
    await page.reload();
    await expect.poll(() => highlighted(page), TIMEOUT).toBe('77');
    await page.getByRole('button', { name: 'Jump to latest' }).click();
    await expect.poll(() => new URL(page.url()).hash, TIMEOUT).toBe('');
    expect(await badLink(page).count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('says so for a link it cannot follow', async () => {
    const { page, errors } = await openPage(dashboard.browser);
    const cases: Array<{ link: string; says: RegExp }> = [
      { link: `/sessions/ses_nobody`, says: /^No session ses_nobody: it does not exist or was deleted\.$/ },
      { link: `/#/s/ses_nobody/e/3`, says: /^No session ses_nobody: it does not exist or was deleted\.$/ },
      {
        link: `/sessions/${id}#seq-${length + 500}`,
        says: new RegExp(`^This link is to event #${length + 500}, past the end of this session: its events are #0–#${length - 1}\\. Showing the latest\\.$`),
      },
      { link: `/#/s/${id}/e/${length}`, says: new RegExp(`^This link is to event #${length}, past the end of this session`) },
      { link: `/sessions/${id}#seq-twelve`, says: /^This link is not valid: #seq-twelve is not an event number \(#seq-<seq>\)\.$/ },
      { link: `/#/s/${id}/e/abc`, says: /^This link is not valid: #\/s\/ses_\w+\/e\/abc is not a link to a session or an event/ },
      { link: `/sessions/${id}#files-x`, says: /^This link is not valid: #files-x is not a files link/ },
      { link: `/nothing/here`, says: /^The dashboard has no page at \/nothing\/here\. Pick a session on the left\.$/ },
    ];
    for (const { link, says } of cases) {
      await page.goto(`${origin}${link}`);
      const notice = page.locator('main [role=alert]').filter({ hasText: says });
      await expect.poll(() => notice.count(), { ...TIMEOUT, message: link }).toBe(1);
    }
    // An event past the end still shows the session, at its latest events: both panes scrolled to their ends.
    await page.goto(`${origin}/sessions/${id}#seq-${length + 500}`);
    await page.locator(`table.timeline tr[data-seq="${length - 1}"]`).waitFor(TIMEOUT);
    const atEnd = (testId: string) =>
      page.getByTestId(testId).evaluate((el) => el.scrollHeight - el.clientHeight - el.scrollTop <= 2 && el.scrollHeight > el.clientHeight);
    await expect.poll(() => atEnd('conversation-scroll'), TIMEOUT).toBe(true);
    // A hash that is not one of the dashboard's (the skip link's #main) is no error.
    await page.goto(`${origin}/sessions/${id}#main`);
    await page.locator(`table.timeline tr[data-seq="${length - 1}"]`).waitFor(TIMEOUT);
    expect(await badLink(page).count()).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });
});
