// What the hostile dashboard tests attack with and watch for (dashboard-hostile.test.ts,
// dashboard-hostile-pages.test.ts): markup and links that would run script or leave the
// origin were they parsed, bidi overrides and zero-width characters; and everything such
// text could make a page do (a global set, a dialog, a request off the origin, a CSP violation).
import type { Page } from 'playwright-core';

export const ATTACKER = 'attacker.invalid';

/** Markup that would set `window.__pwned` (or fetch from the attacker) were it parsed as HTML or followed as a link. */
export const payload = (where: string) =>
  `<img src="http://${ATTACKER}/${where}.png" onerror="window.__pwned='${where}'"><script>window.__pwned='${where}'</script>` +
  `<svg onload="window.__pwned='${where}'"></svg><a href="javascript:window.__pwned='${where}'">click ${where}</a>` +
  ` [md ${where}](javascript:window.__pwned='${where}') ![img ${where}](http://${ATTACKER}/${where}-md.png) <iframe src="data:text/html,<script>parent.__pwned='${where}'</script>"></iframe>` +
  ` ${where}: approve\u202Edenied\u202C pay\u200Bpal`; // reads "approve deined" where bidi overrides act

/** Everything a hostile payload could make the page do: requests off the origin, dialogs, CSP violations, the global it sets. */
export async function watch(page: Page, origin: string) {
  const offOrigin: string[] = [];
  const dialogs: string[] = [];
  page.on('request', (req) => {
    const url = new URL(req.url());
    if (url.origin !== origin && url.protocol !== 'blob:') offOrigin.push(req.url());
  });
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  page.on('popup', (p) => dialogs.push(`popup ${p.url()}`));
  await page.addInitScript(() => {
    const w = window as unknown as { __violations: string[] };
    w.__violations = [];
    document.addEventListener('securitypolicyviolation', (e) => w.__violations.push(`${e.effectiveDirective} ${e.blockedURI} ${e.sample}`));
  });
  return {
    async verdict() {
      const { pwned, violations } = await page.evaluate(() => {
        const w = window as unknown as { __pwned?: string; __violations: string[] };
        return { pwned: w.__pwned, violations: w.__violations };
      });
      return { pwned, violations, offOrigin, dialogs };
    },
  };
}

export const clean = { pwned: undefined, violations: [], offOrigin: [], dialogs: [] };

/** Bidi controls, zero-width and other invisible characters, and control characters (ANSI's ESC) left in what the page shows. */
export const hiddenLeft = (page: Page) =>
  page.evaluate(() => {
    const found: string[] = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement!;
      // eslint-disable-next-line no-control-regex -- control characters are what it looks for
      if (/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff]/u.test(n.textContent ?? '') && el.checkVisibility())
        found.push(`${el.tagName}.${el.className}: ${n.textContent!.slice(0, 60)}`);
    }
    return found;
  });
