// A dashboard build of other code (a copy of client/dashboard/dist) served to
// a browser context in place of this server's own, against this server: the
// scroll bench measures the previous build in the same runs as this one.
import fs from 'node:fs';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';

/**
 * Chromium switches for a browser whose contexts get another build: its page is
 * served by a route, not by a loopback server, and Chromium's local network
 * checks would refuse that page's WebSocket to the loopback server.
 */
export const OTHER_BUILD_ARGS = ['--disable-features=LocalNetworkAccessChecks'];

const CONTENT_TYPES: Record<string, string> = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml' };

/**
 * The page's files in `context` come from `distDir` as src/dashboard-static.ts
 * serves them (a path with an extension is a file, a page's address the app
 * shell); whatever the page asks the server for goes to the server: /graphql
 * and its other doors, such as GET /sessions/<id>/events where the dashboard
 * reads a session's final pages (answered with the app shell, the other
 * build's panes never got those pages: its conversation stayed "Loading…").
 */
export async function serveOtherBuild(context: BrowserContext, distDir: string): Promise<void> {
  const root = path.resolve(distDir);
  await context.route('**/*', async (route) => {
    const { pathname } = new URL(route.request().url());
    const ext = path.extname(pathname);
    if (!ext && route.request().resourceType() !== 'document') return route.continue();
    const file = path.join(root, ext ? path.normalize(pathname) : 'index.html');
    if (!file.startsWith(root + path.sep) || !fs.existsSync(file)) return route.fulfill({ status: 404 });
    return route.fulfill({ body: fs.readFileSync(file), contentType: CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream' });
  });
}
