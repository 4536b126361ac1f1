// GraphiQL (yoga, GET /graphql for browsers) and the dashboard, served from
// this origin only: no CDN, a CSP and the other security
// headers on their pages, and both work in Chromium with every non-loopback
// request blocked and no CSP violation.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { openPage, startDashboard, type Dashboard } from './dashboard-harness.ts';

let dashboard: Dashboard;
let origin: string;

beforeAll(async () => {
  dashboard = await startDashboard();
  origin = dashboard.origin;
});

afterAll(() => dashboard?.close());

/** The CSP's directives by name. */
function cspOf(res: Response): Map<string, string[]> {
  const csp = res.headers.get('content-security-policy') ?? '';
  return new Map(
    csp
      .split(';')
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...sources]) => [name, sources]),
  );
}

function expectPageHeaders(res: Response) {
  const csp = cspOf(res);
  expect(csp.get('script-src')).toEqual(["'self'"]); // no inline script, no eval, no other origin
  expect(csp.get('default-src')).toEqual(["'self'"]);
  expect(csp.get('connect-src')).toEqual(["'self'"]);
  expect(csp.get('frame-ancestors')).toEqual(["'none'"]);
  expect(csp.get('base-uri')).toEqual(["'none'"]);
  expect(csp.get('object-src')).toEqual(["'none'"]);
  for (const sources of csp.values()) for (const s of sources) expect(s).not.toMatch(/^(https?:|\*|'unsafe-eval')/);
  expect(res.headers.get('x-content-type-options')).toBe('nosniff');
  expect(res.headers.get('referrer-policy')).toBe('no-referrer');
  expect(res.headers.get('x-frame-options')).toBe('DENY');
}

/** A browser context where only loopback answers: what reaches elsewhere is recorded and aborted. */
async function offlineContext(): Promise<{ context: BrowserContext; leaked: string[] }> {
  const context = await (await dashboard.browser).newContext({ viewport: { width: 1440, height: 900 } });
  const leaked: string[] = [];
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) return route.continue();
    leaked.push(url.href);
    return route.abort('internetdisconnected');
  });
  // Violations are also console errors; the event names the directive.
  await context.addInitScript(() => {
    (window as any).cspViolations = [];
    document.addEventListener('securitypolicyviolation', (e) => (window as any).cspViolations.push(`${e.violatedDirective} ${e.blockedURI}`));
  });
  return { context, leaked };
}

const violationsOf = (page: Page) => page.evaluate(() => (window as any).cspViolations as string[]);

describe('GraphiQL', () => {
  it('is served from this origin: its page loads nothing from elsewhere, runs no inline script, and has the security headers', async () => {
    const res = await fetch(`${origin}/graphql`, { headers: { accept: 'text/html' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    expectPageHeaders(res);
    const html = await res.text();
    expect(html).toContain('<title>forkline</title>');
    const urls = [...html.matchAll(/\b(?:src|href)\s*=\s*["']?([^"'\s>]+)/g)].map((m) => m[1]);
    expect(urls.length).toBeGreaterThanOrEqual(3); // icon, styles, bundle
    for (const url of urls) expect(url).toMatch(/^\/(?!\/)/); // a path on this origin
    // Every <script> is a file from here or a JSON data block (which never runs).
    for (const [tag] of html.matchAll(/<script\b[^>]*>/g)) expect(tag).toMatch(/\bsrc=|type="application\/json"/);
    for (const url of urls) {
      const asset = await fetch(origin + url);
      expect(asset.status, url).toBe(200);
      expect(asset.headers.get('x-content-type-options')).toBe('nosniff');
      if (url.endsWith('.js')) expect(asset.headers.get('content-type')).toMatch(/^text\/javascript/);
      if (url.endsWith('.css')) expect(asset.headers.get('content-type')).toMatch(/^text\/css/);
      await asset.arrayBuffer();
    }
    expect((await fetch(`${origin}/graphiql/0.0.0/graphiql.js`)).status).toBe(404);
  });

  it('runs a query in Chromium with every non-loopback request blocked, with no CSP violation', async () => {
    await dashboard.app.ok('mutation { createSession(input: { title: "seen through GraphiQL" }) { id } }');
    const { context, leaked } = await offlineContext();
    try {
      const { page, errors } = await openPage(context, { timeoutMs: 20_000 });
      const query = '{ sessions(first: 5) { edges { node { title } } } }';
      await page.goto(`${origin}/graphql?query=${encodeURIComponent(query)}`);
      await page.locator('.graphiql-execute-button').click();
      // Monaco lays text out with no-break spaces.
      const response = async () => (await page.locator('.graphiql-response').textContent())?.replace(/\s+/g, ' ');
      await expect.poll(response, { timeout: 20_000 }).toContain('"title": "seen through GraphiQL"');
      // The Monaco editors ran their workers from this origin (no blob:, no CDN).
      expect(leaked).toEqual([]);
      expect(await violationsOf(page)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});

describe('the dashboard', () => {
  it('has the security headers and loads with every non-loopback request blocked, with no CSP violation', async () => {
    const res = await fetch(`${origin}/`);
    expectPageHeaders(res);
    expect(cspOf(res).get('style-src')).toEqual(["'self'"]);
    await dashboard.app.ok('mutation { createSession(input: { title: "listed on the dashboard" }) { id } }');
    const { context, leaked } = await offlineContext();
    try {
      const { page, errors } = await openPage(context);
      await page.goto(`${origin}/`);
      await page.locator('[data-testid="import-file"]').waitFor({ state: 'attached' });
      await expect.poll(() => page.locator('body').textContent()).toContain('listed on the dashboard'); // its session list queried /graphql
      expect(leaked).toEqual([]);
      expect(await violationsOf(page)).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
