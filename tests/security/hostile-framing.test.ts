// Request framing as hostile input at every door (docs/operations.md "Threat
// model"), with raw sockets: a request whose length is ambiguous
// (Content-Length with Transfer-Encoding, two Content-Lengths), a header value
// with a control character, or a request line past the header limit (very
// many query parameters) is refused with 4xx and its connection closed, so
// nothing smuggled after it is ever served as a second request.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

const TOKEN = 'hostile-framing-token-0123456789';
let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ security: { apiTokens: new Map([[TOKEN, 'acme']]), rateLimit: false, authFailures: false } });
});
afterAll(() => app?.close());

/** Sends `text` and reads until the server closes the connection (or 10 s): every status line it answered with. */
function exchange(text: string): Promise<{ statuses: number[]; closed: boolean }> {
  const { hostname, port } = new URL(app.url);
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let out = '';
    socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
    socket.on('error', () => {});
    const statuses = () => [...out.matchAll(/(?:^|\r\n)HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    const timer = setTimeout(() => (socket.destroy(), resolve({ statuses: statuses(), closed: false })), 10_000);
    socket.once('close', () => (clearTimeout(timer), resolve({ statuses: statuses(), closed: true })));
    socket.write(text);
  });
}

const DOORS = [
  ['POST', '/agui'],
  ['POST', '/chat'],
  ['POST', '/recordings'],
  ['POST', '/graphql'],
  ['GET', '/sessions/ses_x/events'],
  ['GET', '/recordings?session=ses_x'],
] as const;
/** A request the server would answer (here: 404 for an unknown path) if it were parsed as a second one. */
const SMUGGLED = 'GET /smuggled HTTP/1.1\r\nhost: localhost\r\n\r\n';
const head = (method: string, path: string, fields: string[]) =>
  `${method} ${path} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${TOKEN}\r\ncontent-type: application/json\r\n${fields.join('\r\n')}\r\n\r\n`;

describe.each(DOORS)('%s %s', (method, path) => {
  it.each([
    ['Content-Length with Transfer-Encoding', ['content-length: 5', 'transfer-encoding: chunked'], `0\r\n\r\n${SMUGGLED}`],
    ['two different Content-Lengths', ['content-length: 2', 'content-length: 40'], `{}${SMUGGLED}`],
    ['a control character in a header value', ['x-note: a\x01b', 'content-length: 2'], `{}${SMUGGLED}`],
    ['a bare CR in a header value', ['x-note: a\rb', 'content-length: 2'], `{}${SMUGGLED}`],
  ])('%s: 400, the connection closed, nothing after it served', async (_name, fields, rest) => {
    const { statuses, closed } = await exchange(head(method, path, fields) + rest);
    expect(statuses).toEqual([400]);
    expect(closed).toBe(true);
  });
});

it.each(DOORS)('%s %s with very many query parameters: 431 before any door, the connection closed', async (method, path) => {
  const params = Array.from({ length: 5000 }, (_, i) => `p${i}=1`).join('&');
  const { statuses, closed } = await exchange(head(method, `${path}${path.includes('?') ? '&' : '?'}${params}`, ['content-length: 0']));
  expect(statuses).toEqual([431]);
  expect(closed).toBe(true);
});

it('a door still answers on a fresh connection', async () => {
  const { statuses } = await exchange(`GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`);
  expect(statuses).toEqual([200]);
});
