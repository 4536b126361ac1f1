// Fan-out pages at their full size in one browser with one API token: six
// pages of one fork point of 50 variants (each page's 50 cards follow their
// variants' text live) under the token's subscription cap (250). With one
// subscription per card, five pages took the token's places and the sixth
// page's cards were refused (TOO_MANY_SUBSCRIPTIONS, unseen: the cards just
// never streamed); with one subscription for the page's cards (sessionsTurns),
// every page streams, and a page holds a handful of subscriptions, not 50.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page, WebSocket } from 'playwright-core';
import type { TestApp } from '../helpers/app.ts';
import { appendTurns, openPage, recordVariantLiveTexts, startDashboard, type Dashboard } from './dashboard-harness.ts';

const TOKEN = 'alpha-fan-out-0123456789abcdef';
const AUTH = { authorization: `Bearer ${TOKEN}` };
const VARIANTS = 50;
const PAGES = 6;
const TIMEOUT = { timeout: 30_000 };

let dashboard: Dashboard;
let app: TestApp;
let origin: string;

beforeAll(async () => {
  ({ app, origin } = dashboard = await startDashboard({ security: { apiTokens: new Map([[TOKEN, 'alpha']]), rateLimit: false } }));
});
afterAll(() => dashboard?.close());

async function ok(query: string, variables: Record<string, unknown>) {
  const r = await app.gql(query, variables, AUTH);
  if (r.errors?.length) throw new Error(JSON.stringify(r.errors));
  return r.data;
}

/** What a page's WebSocket says: subscriptions started and ended (by id), and the errors it was sent. */
function watchSockets(page: Page) {
  const started = new Set<string>();
  const ended = new Set<string>();
  const errors: string[] = [];
  page.on('websocket', (ws: WebSocket) => {
    ws.on('framesent', ({ payload }) => {
      const m = JSON.parse(String(payload));
      if (m.type === 'subscribe' && /^\s*subscription\b/.test(m.payload.query)) started.add(m.id);
      if (m.type === 'complete') ended.add(m.id);
    });
    ws.on('framereceived', ({ payload }) => {
      const m = JSON.parse(String(payload));
      if (m.type === 'error') errors.push(JSON.stringify(m.payload));
      if (m.type === 'complete') ended.add(m.id);
    });
  });
  return { open: () => [...started].filter((id) => !ended.has(id)).length, errors };
}

describe('fan-out pages under one token', () => {
  it(`${PAGES} pages of ${VARIANTS} live variants each: every page streams, each with one subscription for its cards`, async () => {
    const parent = (await ok('mutation { createSession(input: { title: "fan-out parent" }) { id } }', {})).createSession.id as string;
    await appendTurns(app, parent, 1, 1);
    const atSeq = (await ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: parent })).session.eventCount - 1;
    const children: string[] = [];
    for (let i = 0; i < VARIANTS; i++)
      children.push(
        (
          await ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
            i: { sessionId: parent, atSeq, title: `variant ${i + 1}` },
          })
        ).forkSession.session.id,
      );

    const context = await (await dashboard.browser).newContext({ viewport: { width: 1440, height: 900 } });
    const pages = [];
    for (let i = 0; i < PAGES; i++) {
      const { page, errors } = await openPage(context, { timeoutMs: 30_000 });
      const sockets = watchSockets(page);
      await page.goto(i === 0 ? `${origin}/sessions/${parent}/forks/${atSeq}?token=${TOKEN}` : `${origin}/sessions/${parent}/forks/${atSeq}`);
      await expect.poll(() => page.getByTestId('variant-card').count(), TIMEOUT).toBe(VARIANTS);
      const liveTexts = await recordVariantLiveTexts(page);
      pages.push({ page, errors, sockets, liveTexts });
    }
    // Each page's subscriptions are a handful (its list's and its cards' one), not one per card.
    for (const { sockets } of pages) await expect.poll(() => sockets.open(), TIMEOUT).toBeGreaterThan(0);
    for (const { sockets } of pages) expect(sockets.open()).toBeLessThan(10);

    // The first and the last variant answer, slowly: every page shows both texts as they stream.
    const send = (sessionId: string, text: string) => ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
    const watched = [children[0], children[VARIANTS - 1]];
    for (const id of watched) await send(id, `!slow 40\nvariant ${id} answers word by word, slowly enough to watch it arrive`);
    for (const { page } of pages)
      for (const id of watched)
        await expect
          .poll(
            () =>
              page
                .locator(`[data-testid="variant-card"][data-session-id="${id}"] [data-testid="variant-answer"]`)
                .textContent({ timeout: 200 })
                .catch(() => ''),
            TIMEOUT,
          )
          .toContain('slowly enough to watch it arrive');
    await app.services.host.idle();
    for (const [i, { errors, sockets, liveTexts }] of pages.entries()) {
      const live = await liveTexts();
      for (const id of watched) {
        expect(live[id]?.length ?? 0, `page ${i + 1}: ${id} streamed`).toBeGreaterThan(1);
        expect(live[id].at(-1)).toContain('slowly enough');
      }
      expect(sockets.errors, `page ${i + 1}`).toEqual([]);
      expect(errors, `page ${i + 1}`).toEqual([]);
    }
    await context.close();
  }, 240_000);
});
