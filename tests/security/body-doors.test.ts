// Request bodies at every door (issue 27, chaos findings): a body over the
// limit with a Content-Length always gets its 413, and invalid UTF-8 is
// refused the same way by /graphql (the fast lane and yoga), /agui,
// /recordings and WebSocket messages, never stored as U+FFFD.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
const LIMIT = 64 * 1024;
beforeAll(async () => {
  app = await startTestApp({ security: { maxBodyBytes: LIMIT } });
});
afterAll(async () => {
  await app?.close();
});

const urlOf = (path: string) => app.url.replace(/\/graphql$/, path);

/**
 * A plain HTTP/1.1 client that sends its whole request before it reads the
 * answer (as Python's http.client does): `bodyBytes` of padding after the
 * given prefix, announced by Content-Length. Its status, or the socket error
 * that kept it from reading one.
 */
function postThenRead(path: string, contentType: string, bodyBytes: number): Promise<number | string> {
  const { hostname, port } = new URL(urlOf(path));
  return new Promise((resolve) => {
    const socket = net.connect({ host: hostname, port: Number(port) });
    let answer = '';
    let failed: string | undefined;
    socket.on('error', (err: NodeJS.ErrnoException) => (failed ??= err.code ?? err.message));
    socket.on('close', () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1];
      resolve(status ? Number(status) : (failed ?? 'closed without an answer'));
    });
    socket.once('connect', async () => {
      socket.write(`POST ${path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: ${contentType}\r\ncontent-length: ${bodyBytes}\r\n\r\n`);
      const chunk = Buffer.alloc(1024 * 1024, 'x');
      for (let sent = 0; sent < bodyBytes && !failed && !socket.destroyed; sent += chunk.length) {
        const piece = sent + chunk.length <= bodyBytes ? chunk : chunk.subarray(0, bodyBytes - sent);
        if (!socket.write(piece)) await new Promise((r) => (socket.once('drain', r), socket.once('close', r)));
      }
      // Only now does it read (and it stops at the first answer's head: enough for its status).
      socket.on('data', (d: Buffer) => {
        answer += d.toString('latin1');
        if (answer.includes('\r\n\r\n')) socket.destroy();
      });
    });
  });
}

describe('413 for an announced body over the limit', () => {
  it('reaches a client that sends its whole body before reading, every time (/graphql, /agui)', async () => {
    const statuses: Array<number | string> = [];
    // 24 MiB: far more than the socket buffers between the two ends hold.
    for (let i = 0; i < 30; i++) statuses.push(await postThenRead(i % 3 === 2 ? '/agui' : '/graphql', 'application/json', 24 * 1024 * 1024));
    expect(statuses).toEqual(statuses.map(() => 413));
    // The connection was not cut under anyone: the server still answers.
    expect((await app.gql('{ __typename }')).data).toEqual({ __typename: 'Query' });
  });

  it('reaches a client uploading a recording past its 64 MB limit', async () => {
    const statuses: Array<number | string> = [];
    for (let i = 0; i < 3; i++) statuses.push(await postThenRead('/recordings', 'application/x-ndjson', 150 * 1024 * 1024));
    expect(statuses).toEqual([413, 413, 413]);
  });
});
