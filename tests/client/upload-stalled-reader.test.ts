// The typed client's upload to a server that reads the start of the recording and then stops reading (pauses the
// request, never answers): the client's writes back up, and the upload fails with RESPONSE_TIMEOUT once the server
// has taken nothing for responseTimeoutMs (docs/api.md, "The typed client") — for a string, a Blob and a stream,
// with and without onProgress, and in `forkline import`. The client lets go of the connection and of the recording:
// a process that did only this exits by itself. The time its own stream takes to give the next chunk is not the
// server's: a slow stream into a server that reads is waited for.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { createForklineClient, ForklineClientError } from '@forkline/client';
import { runCli } from '../helpers/cli.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

const BOUND_MS = 1_000;
/** Far more than the sockets' and the transport's buffers hold between the client and a server that stopped reading. */
const SIZE = 32 * 1024 * 1024;
const READ_FIRST = 64 * 1024;
const SILENT = new RegExp(`no answer from the server for ${BOUND_MS} ms \\(responseTimeoutMs\\)`);
const SESSION = { id: 'ses_slow_source', eventCount: 1, formatVersion: 4, title: null };

const servers: http.Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
}

/** A POST /recordings that reads the first READ_FIRST bytes of the recording, then stops reading and never answers. */
const stalledReader = () =>
  listen((req) => {
    let read = 0;
    req.on('data', (chunk: Buffer) => {
      read += chunk.length;
      if (read >= READ_FIRST) req.pause();
    });
  });

/** A POST /recordings that reads the whole recording and then answers with the new session (plain JSON). */
const wholeReader = () =>
  listen((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ session: SESSION })));
  });

const spaces = () => ' '.repeat(SIZE);
/** SIZE bytes, made a chunk at a time as the transport pulls them. */
function generated(): ReadableStream<Uint8Array> {
  const chunk = new Uint8Array(64 * 1024).fill(0x20);
  let sent = 0;
  return new ReadableStream({
    pull: (controller) => {
      if (sent >= SIZE) return controller.close();
      sent += chunk.length;
      controller.enqueue(chunk);
    },
  });
}

const bodies: Array<[string, () => string | Blob | ReadableStream<Uint8Array>]> = [
  ['a string', spaces],
  ['a Blob', () => new Blob([spaces()])],
  ['a stream', generated],
];

async function failure(p: Promise<unknown>): Promise<ForklineClientError> {
  const err = await p.then(
    () => new Error('the upload succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ForklineClientError);
  return err as ForklineClientError;
}

describe('an upload the server stops reading partway through', () => {
  it.each(bodies)(
    '%s: fails RESPONSE_TIMEOUT, with and without onProgress',
    async (_kind, body) => {
      const client = createForklineClient({ url: await stalledReader(), responseTimeoutMs: BOUND_MS, retryForMs: 0 });
      for (const opts of [{}, { onProgress: () => {} }]) {
        const err = await failure(client.uploadRecording(body(), opts));
        expect(err.code).toBe('RESPONSE_TIMEOUT');
        expect(err.message).toMatch(SILENT);
      }
    },
    60_000,
  );

  // Before: Node's fetch, aborted, read the rest of the request body in a loop that held the event loop: a stream's
  // every remaining byte was read (and an endless one for ever: the process never exited), and it was never cancelled.
  it.each(['string', 'blob', 'stream', 'endless'])(
    '%s: the failed upload lets go of everything: its process exits by itself',
    async (kind) => {
      const url = await stalledReader();
      const child = spawn(
        process.execPath,
        [`${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`, `${PROJECT_ROOT}tests/fixtures/upload-to-stalled-reader.ts`, url, `${BOUND_MS}`, kind],
        {
          cwd: PROJECT_ROOT,
        },
      );
      onTestFinished(() => void child.kill());
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c) => (stdout += c));
      child.stderr.on('data', (c) => (stderr += c));
      // A handle left open (the socket, a timer, the recording's reader) keeps it alive: the test times out.
      const code = await new Promise((resolve) => child.on('close', resolve));
      expect(stderr).toBe('');
      expect(code).toBe(0);
      expect(JSON.parse(stdout)).toMatchObject({
        code: 'RESPONSE_TIMEOUT',
        message: expect.stringMatching(SILENT),
        cancelled: kind === 'stream' || kind === 'endless',
      });
    },
    60_000,
  );

  it('forkline import --response-timeout-ms: fails the same way', async () => {
    const file = path.join(os.tmpdir(), `forkline-stalled-reader-${process.pid}.jsonl`);
    fs.writeFileSync(file, spaces());
    try {
      const run = await runCli(await stalledReader(), ['import', file, '--response-timeout-ms', `${BOUND_MS}`]);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(SILENT);
    } finally {
      fs.rmSync(file, { force: true });
    }
  }, 60_000);

  it("does not count the wait for the caller's own stream against the server", async () => {
    const client = createForklineClient({ url: await wholeReader(), responseTimeoutMs: BOUND_MS, retryForMs: 0 });
    // The next chunk comes only after more than the bound (a slow pipe into `forkline import -`).
    let step = 0;
    const slow = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        if (step++ === 2) return controller.close();
        if (step === 2) await new Promise((resolve) => setTimeout(resolve, 2.5 * BOUND_MS));
        controller.enqueue(new TextEncoder().encode('{}\n'));
      },
    });
    await expect(client.uploadRecording(slow)).resolves.toMatchObject({ id: SESSION.id });
  }, 30_000);
});
