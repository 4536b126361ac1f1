// The typed client's wait for an import's outcome (docs/api.md, "The typed client"): the server writes a progress
// line every quarter second while an import waits or runs (src/http/import-progress.ts), so the client bounds the
// silence between lines by responseTimeoutMs, not the whole import: a server that stops answering fails the upload
// with a clear error (before: the upload, and `forkline import`, waited forever), and one that keeps reporting
// progress for longer than the bound is waited for. The client asks for the progress lines whether or not its caller
// shows them (they are the keep-alive), and the wait for the answer's headers once the recording is sent is bounded
// alike: a server that takes the upload and never answers fails it (before: without onProgress, or before the
// headers, the upload waited forever). The CLI takes the client's bounds as flags.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createForklineClient } from '@forkline/client';
import { runCli } from '../helpers/cli.ts';

const servers: http.Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

const progressLine = (queued: boolean) => `${JSON.stringify({ progress: { bytes: 0, totalBytes: 10, lines: 0, queued } })}\n`;
const SESSION = { id: 'ses_waited', eventCount: 1, formatVersion: 4, title: null };

/**
 * A POST /recordings that answers with progress lines when asked for them (as the server does): `lines` of them a
 * quarter second apart, then the outcome, or (stall) nothing more; not asked, the outcome alone after as long, or
 * (stall) nothing at all.
 * `lines` -1: it takes the whole upload, then never answers, not even its headers.
 */
async function serve(lines: number, stall: boolean): Promise<string> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (lines < 0) return;
      if (!/application\/x-ndjson/.test(req.headers.accept ?? '')) {
        if (stall) return;
        const later = setTimeout(() => res.end(JSON.stringify({ session: SESSION })), lines * 250);
        res.on('close', () => clearTimeout(later));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/x-ndjson' });
      let n = 0;
      const tick = setInterval(() => {
        if (res.destroyed) return clearInterval(tick);
        if (n++ < lines) return res.write(progressLine(n < 2));
        clearInterval(tick);
        if (!stall) res.end(`${JSON.stringify({ status: 201, session: SESSION })}\n`);
      }, 250);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
}

const RECORDING = `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_x' } })}\n`;

describe("the client's wait for an import's outcome", () => {
  it('fails with a clear error once the server has sent no progress for responseTimeoutMs (before: waited forever)', async () => {
    const client = createForklineClient({ url: await serve(1, true), responseTimeoutMs: 1_000, retryForMs: 0 });
    const seen: unknown[] = [];
    await expect(client.uploadRecording(RECORDING, { onProgress: (p) => seen.push(p) })).rejects.toThrow(
      /no progress from the server for 1000 ms \(responseTimeoutMs\)/,
    );
    expect(seen.length).toBe(1);
  }, 30_000);

  it('waits past responseTimeoutMs for an import that keeps reporting progress', async () => {
    const client = createForklineClient({ url: await serve(12, false), responseTimeoutMs: 1_000, retryForMs: 0 });
    const seen: unknown[] = [];
    await expect(client.uploadRecording(RECORDING, { onProgress: (p) => seen.push(p) })).resolves.toMatchObject({ id: 'ses_waited' });
    expect(seen.length).toBe(12);
  }, 30_000);

  it('fails once the server has taken the upload and said nothing for responseTimeoutMs, with or without onProgress (before: waited forever)', async () => {
    const client = createForklineClient({ url: await serve(-1, true), responseTimeoutMs: 1_000, retryForMs: 0 });
    const silent = /no answer from the server for 1000 ms \(responseTimeoutMs\)/;
    await expect(client.uploadRecording(RECORDING)).rejects.toThrow(silent);
    await expect(client.uploadRecording(RECORDING, { onProgress: () => {} })).rejects.toThrow(silent);
    const stream = new Blob([RECORDING]).stream();
    await expect(client.uploadRecording(stream)).rejects.toMatchObject({ code: 'RESPONSE_TIMEOUT' });
  }, 30_000);

  it('without onProgress: fails once the progress lines stop, and waits past the bound while they come', async () => {
    const stalled = createForklineClient({ url: await serve(1, true), responseTimeoutMs: 1_000, retryForMs: 0 });
    await expect(stalled.uploadRecording(RECORDING)).rejects.toThrow(/no progress from the server for 1000 ms \(responseTimeoutMs\)/);
    const reporting = createForklineClient({ url: await serve(12, false), responseTimeoutMs: 1_000, retryForMs: 0 });
    await expect(reporting.uploadRecording(RECORDING)).resolves.toMatchObject({ id: 'ses_waited' });
  }, 30_000);

  it('forkline import --response-timeout-ms: the bound as a flag, and a bad value refused', async () => {
    const file = path.join(os.tmpdir(), `forkline-outcome-${process.pid}.jsonl`);
    fs.writeFileSync(file, RECORDING);
    try {
      const url = await serve(1, true);
      const stalled = await runCli(url, ['import', file, '--response-timeout-ms', '1000', '--max-response-bytes', '65536']);
      expect(stalled.code).not.toBe(0);
      expect(stalled.stderr).toMatch(/no progress from the server for 1000 ms \(responseTimeoutMs\)/);
      const unanswered = await runCli(await serve(-1, true), ['import', file, '--response-timeout-ms', '1000', '--max-response-bytes', '65536']);
      expect(unanswered.code).not.toBe(0);
      expect(unanswered.stderr).toMatch(/no answer from the server for 1000 ms \(responseTimeoutMs\)/);
      const bad = await runCli(url, ['import', file, '--response-timeout-ms', 'soon']);
      expect(bad.code).toBe(2);
      expect(bad.stderr).toMatch(/--response-timeout-ms takes a whole number above 0/);
    } finally {
      fs.rmSync(file, { force: true });
    }
  }, 60_000);
});
