// The dashboard's static files (src/dashboard-static.ts) on odd paths (issue
// 27): a NUL, `..`, bad percent-encoding or an over-long name is a 404, never
// a 5xx, and never a file outside the dashboard.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

/** GET with the path sent as it is (fetch would normalise it). */
function get(path: string): Promise<{ status: number; body: string }> {
  const { hostname, port } = new URL(app.url);
  return new Promise((resolve, reject) => {
    const req = http.get({ hostname, port, path }, (res) => {
      let body = '';
      res
        .setEncoding('utf8')
        .on('data', (c) => (body += c))
        .on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
  });
}

describe('odd static paths', () => {
  it('answer 404', async () => {
    for (const path of [
      '/index.html%00.js',
      '/assets/%00',
      '/sessions/a%00b',
      '/%0a.js',
      '/..%2f..%2fpackage.json',
      '/%2e%2e/%2e%2e/package.json',
      '/assets/..%2f..%2f..%2fpackage.json',
      '/%E0%A4%A.js',
      '/%',
      '/%zz',
      '/index.html/x.js',
      `/${'a'.repeat(300)}.js`,
    ]) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(r.body, path).not.toMatch(/"name": "forkline"/);
    }
  });

  it('still serve the app shell and its assets', async () => {
    const shell = await get('/sessions/ses_x');
    expect(shell.status).toBe(200);
    expect(shell.body).toMatch(/<html/i);
    const script = /src="(\/assets\/[^"]+\.js)"/.exec(shell.body)![1];
    expect((await get(script)).status).toBe(200);
  });
});
