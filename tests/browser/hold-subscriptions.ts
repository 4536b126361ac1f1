// A page's subscriptions held back in the browser: the read of a page is
// answered over HTTP while its subscription goes over the WebSocket, and
// nothing orders the two, so a test can make the change a page must not miss
// while the server is not yet listening (tests/browser/dashboard-live-query.test.ts).
import type { Page, WebSocketRoute } from 'playwright-core';

/** Holds the page's subscribe messages of the subscription fields `fields` until `release` is called (the rest of the socket flows). */
export async function holdSubscriptions(page: Page, fields: readonly string[]) {
  const held: Array<{ field: string; send: () => void }> = [];
  const names = fields.map((f) => new RegExp(`\\b${f}\\b`));
  let holding = true;
  await page.routeWebSocket(/\/graphql/, (ws: WebSocketRoute) => {
    const server = ws.connectToServer();
    ws.onMessage((msg) => {
      const field = holding && typeof msg === 'string' && msg.includes('"subscribe"') ? fields.find((_, i) => names[i].test(msg)) : undefined;
      if (field) held.push({ field, send: () => server.send(msg) });
      else server.send(msg);
    });
    server.onMessage((msg) => ws.send(msg));
  });
  return {
    /** How many subscribe messages are held (of `field` only, when named). */
    held: (field?: string) => held.filter((h) => field === undefined || h.field === field).length,
    release: () => {
      holding = false;
      for (const { send } of held.splice(0)) send();
    },
  };
}
