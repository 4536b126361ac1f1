// A burst of new connections to a busy process waits in the kernel's accept
// queue instead of being dropped (server.ts LISTEN_BACKLOG). libuv accepts one
// connection per event-loop iteration, so a busy process drains that queue
// slowly; a SYN the kernel drops because the queue is full costs its client a
// 1 s retransmit, and a few in a row a connect timeout. Linux: the kernel's
// count of dropped SYNs is read from /proc/net/netstat.
import fs from 'node:fs';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

/** TcpExt ListenOverflows: connection attempts a listening socket dropped because its accept queue was full. */
function listenOverflows(): number {
  const lines = fs.readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const header = lines.findIndex((l) => l.startsWith('TcpExt:'));
  const names = lines[header].split(/\s+/);
  const values = lines[header + 1].split(/\s+/);
  return Number(values[names.indexOf('ListenOverflows')]);
}

/** The kernel's cap on any listen backlog; 1,200 connections fit under the usual 4,096 (Node's default backlog, 511, does not). */
const clients = () => Math.min(1200, Number(fs.readFileSync('/proc/sys/net/core/somaxconn', 'utf8')) - 100);

describe.runIf(process.platform === 'linux')('a burst of new connections', () => {
  it('1,200 clients connecting while the process is busy are all queued by the kernel, none dropped', async () => {
    const port = Number(new URL(app.url).port);
    const before = listenOverflows();
    const sockets = Array.from({ length: clients() }, () => net.connect({ port, host: '127.0.0.1' }));
    const connected = Promise.all(sockets.map((s) => new Promise((resolve, reject) => s.once('connect', resolve).once('error', reject))));
    // This process is the server: while it is busy nothing is accepted, and the
    // kernel completes the handshakes into the accept queue (511 places by default).
    const until = Date.now() + 300;
    while (Date.now() < until);
    await connected;
    const dropped = listenOverflows() - before;
    // Each connection is served once accepted.
    const answers = await Promise.all(
      sockets.slice(0, 50).map(
        (s) =>
          new Promise<string>((resolve, reject) => {
            let text = '';
            s.setEncoding('utf8')
              .on('data', (d: string) => (text += d))
              .once('end', () => resolve(text))
              .once('error', reject);
            s.end('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n');
          }),
      ),
    );
    for (const s of sockets) s.destroy();
    expect(dropped).toBe(0);
    expect(answers.every((a) => a.startsWith('HTTP/1.1 200'))).toBe(true);
  });
});
