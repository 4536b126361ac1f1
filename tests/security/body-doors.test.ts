// Request bodies at every door: a body over the
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
  app = await startTestApp({ security: { maxBodyBytes: LIMIT, maxRecordingBytes: 64 * 2 ** 20 } });
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
        if (!socket.write(piece)) {
          await new Promise<void>((r) => {
            const done = () => (socket.off('drain', done), socket.off('close', done), r());
            socket.once('drain', done).once('close', done);
          });
        }
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

describe('invalid UTF-8, refused the same way at every door', () => {
  /** `{"query": …, "variables": {"t": "ab<0xff>cd"}}` as bytes: the title holds a byte that is not UTF-8. */
  const INVALID_TITLE = Buffer.concat([
    Buffer.from('{"query":"mutation($t: String) { createSession(input: { title: $t }) { id title } }","variables":{"t":"ab'),
    Buffer.from([0xff]),
    Buffer.from('cd"}}'),
  ]);
  const replaced = async () => (await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE data::text LIKE '%' || chr(65533) || '%'`)).rows[0].n;
  const expectRefused = async (res: Response) => {
    expect(res.status).toBe(400);
    const body = await res.json();
    expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(body.errors[0].message).toMatch(/not valid UTF-8/);
  };

  it('/graphql: 400 BAD_USER_INPUT through the fast lane and through yoga, nothing stored', async () => {
    // Content-Length and JSON: the fast lane's request.
    await expectRefused(await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: INVALID_TITLE }));
    // Chunked: yoga's request.
    const chunked = new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(INVALID_TITLE)), c.close()) });
    await expectRefused(
      await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chunked, duplex: 'half' } as RequestInit),
    );
    // A subscription over SSE: yoga's too.
    await expectRefused(
      await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: INVALID_TITLE }),
    );
    expect(await replaced()).toBe(0);
    // The same request in valid UTF-8 goes through.
    const valid = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(INVALID_TITLE.toString('latin1').replace('\xff', 'é'), 'utf8'),
    });
    expect((await valid.json()).data.createSession.title).toBe('abécd');
  });

  it('/agui and /recordings: the same 400', async () => {
    const run = Buffer.concat([
      Buffer.from(
        '{"threadId":"t-utf8","runId":"r-utf8","state":{},"tools":[],"context":[],"forwardedProps":{},"messages":[{"id":"m1","role":"user","content":"hi ',
      ),
      Buffer.from([0xc3, 0x28]),
      Buffer.from('"}]}'),
    ]);
    await expectRefused(await fetch(urlOf('/agui'), { method: 'POST', headers: { 'content-type': 'application/json' }, body: run }));
    const recording = Buffer.concat([
      Buffer.from('{"format":"forkline.recording","version":4,"session":{"id":"s","title":"a'),
      Buffer.from([0xff]),
      Buffer.from('"}}\n'),
    ]);
    await expectRefused(await fetch(urlOf('/recordings'), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: recording }));
    expect(await replaced()).toBe(0);
  });

  it('WebSocket: a message that is not UTF-8, binary or text, closes the socket with 1007 and says why', async () => {
    const subscribe = Buffer.concat([Buffer.from('{"id":"1","type":"subscribe","payload":'), INVALID_TITLE, Buffer.from('}')]);
    for (const binary of [true, false]) {
      const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
      await new Promise((r) => ws.once('open', r));
      ws.send(JSON.stringify({ type: 'connection_init' }));
      await new Promise((r) => ws.once('message', r)); // connection_ack
      // What comes first: the close, or an answer to the operation.
      const outcome = new Promise((resolve) => {
        ws.once('close', (code, reason) => resolve({ code, reason: String(reason) }));
        ws.once('message', (data) => resolve({ message: String(data) }));
      });
      ws.send(subscribe, { binary });
      expect(await outcome).toEqual({ code: 1007, reason: expect.stringMatching(/not valid UTF-8/) });
    }
    expect(await replaced()).toBe(0);
  });
});
