// The dashboard and `/?token=` links: a link's token is kept when
// the browser has none, but one that differs from the kept token replaces it
// only when the user confirms — a link must not switch anyone into another
// tenant. Chromium against a server with two tenants.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TOKEN_A = 'alpha-dashboard-0123456789abcdef';
const TOKEN_B = 'beta-dashboard-0123456789abcdef0';
const TIMEOUT = { timeout: 10_000 };

let dashboard: Dashboard;
let app: TestApp;
let browser: Promise<Browser>;
let origin: string;
let alphaId: string;
let betaId: string;

beforeAll(async () => {
  ({ app, browser, origin } = dashboard = await startDashboard({
    security: {
      apiTokens: new Map([
        [TOKEN_A, 'alpha'],
        [TOKEN_B, 'beta'],
      ]),
      rateLimit: false,
    },
  }));
  const create = async (token: string, title: string) =>
    (await app.gql(`mutation { createSession(input: { title: "${title}" }) { id } }`, undefined, { authorization: `Bearer ${token}` })).data.createSession.id;
  alphaId = await create(TOKEN_A, 'alpha session');
  betaId = await create(TOKEN_B, 'beta session');
});
afterAll(() => dashboard?.close());

describe('a ?token= link', () => {
  it('asks before replacing the stored token with a different one, and keeps it out of the address bar', async () => {
    const context = await (await browser).newContext();
    const { page, errors } = await openPage(context);
    const dialog = page.getByRole('dialog', { name: 'Replace the stored API token?' });
    const stored = () => page.evaluate(() => localStorage.getItem('forkline.token'));

    // No token kept yet: the link's is kept without a question.
    await page.goto(`${origin}/?token=${TOKEN_A}`);
    await page.locator(`.tree [data-session-id="${alphaId}"]`).waitFor(TIMEOUT);
    expect(await dialog.count()).toBe(0);
    expect(await stored()).toBe(TOKEN_A);
    expect(page.url()).toBe(`${origin}/`);

    // Another tenant's token in a link: asked, and keeping ours changes nothing.
    await page.goto(`${origin}/?token=${TOKEN_B}`);
    await dialog.waitFor(TIMEOUT);
    expect(page.url()).toBe(`${origin}/`);
    expect(await dialog.textContent()).toContain(`…${TOKEN_B.slice(-4)}`);
    await page.locator(`.tree [data-session-id="${alphaId}"]`).waitFor(TIMEOUT);
    expect(await stored()).toBe(TOKEN_A);
    await dialog.getByRole('button', { name: 'Keep my token' }).click();
    await dialog.waitFor({ state: 'hidden', ...TIMEOUT });
    expect(await stored()).toBe(TOKEN_A);
    expect(await page.locator(`.tree [data-session-id="${betaId}"]`).count()).toBe(0);

    // Asked again, and this time accepted: the dashboard is beta's.
    await page.goto(`${origin}/?token=${TOKEN_B}`);
    await dialog.getByRole('button', { name: "Use the link's token" }).click();
    await page.locator(`.tree [data-session-id="${betaId}"]`).waitFor(TIMEOUT);
    expect(await stored()).toBe(TOKEN_B);
    expect(await page.locator(`.tree [data-session-id="${alphaId}"]`).count()).toBe(0);

    // A link with the token already kept asks nothing.
    await page.goto(`${origin}/?token=${TOKEN_B}`);
    await page.locator(`.tree [data-session-id="${betaId}"]`).waitFor(TIMEOUT);
    expect(await dialog.count()).toBe(0);
    expect(errors).toEqual([]);
    await context.close();
  });
});
