// The Authorization field as hostile input (docs/operations.md "Tenants"):
// it is a singleton, and Node keeps the first of several and drops the rest,
// so a proxy adding its own after the client's would authenticate one caller
// while forkline served another. Several are refused (400) at every gated
// door before anything is read; one is served as before.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const ADMIN = 'alpha-bootstrap-0123456789abcdef';
const OTHER = 'beta-bootstrap-0123456789abcdef0';
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({
    security: {
      apiTokens: new Map([
        [ADMIN, 'alpha'],
        [OTHER, 'beta'],
      ]),
      rateLimit: false,
    },
  });
});
afterAll(() => app?.close());

/** A request written by hand (fetch would join repeated fields into one): its status line and body. */
function rawPost(door: string, contentType: string, body: string, authorizations: string[]): Promise<{ status: number; body: string }> {
  const url = new URL(app.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      const fields = [`Host: ${url.host}`, `content-type: ${contentType}`, `content-length: ${Buffer.byteLength(body)}`, 'connection: close'];
      socket.end(`POST ${door} HTTP/1.1\r\n${[...fields, ...authorizations.map((a) => `Authorization: ${a}`)].join('\r\n')}\r\n\r\n${body}`);
    });
    let out = '';
    socket.on('data', (d) => (out += d));
    socket.on('error', reject);
    socket.on('close', () => resolve({ status: Number(out.split(' ')[1]), body: out.slice(out.indexOf('\r\n\r\n') + 4) }));
  });
}

const QUERY = JSON.stringify({ query: '{ __typename }' });
const RECORDING = `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_auth', title: 'auth' } })}\n`;

describe('several Authorization fields', () => {
  it.each([
    ['/graphql', 'application/json', QUERY],
    ['/recordings', 'application/x-ndjson', RECORDING],
    ['/agui', 'application/json', '{}'],
  ])('are refused at %s with 400, whichever comes first; one is served', async (door, type, body) => {
    for (const pair of [
      [`Bearer ${ADMIN}`, `Bearer ${OTHER}`],
      [`Bearer ${ADMIN}`, 'Bearer not-a-token-of-anyone-at-all'],
    ]) {
      const r = await rawPost(door, type, body, pair);
      expect(r.status).toBe(400);
      expect(r.body).toContain('send one Authorization header, not several');
    }
    expect((await rawPost('/graphql', 'application/json', QUERY, [`Bearer ${ADMIN}`])).status).toBe(200);
  });
});
