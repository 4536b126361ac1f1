// `forkline export` streams GET /recordings to a file or stdout:
// the CLI runs as a subprocess against a real server, with its JavaScript heap
// capped well below the recording's size: it passes the bytes on as they come
// (reading the Session.recording string, as it did, holds the whole recording,
// and its JSON response, in memory). Progress goes to
// stderr when asked for (or a terminal); the bytes are the server's, and a
// failed export leaves no file behind.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLongSession } from '../../bench/long-session.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

const EVENTS = 28_000;
/** ~16 kB on each of the 4,000 answers: a recording of ~70 MB. */
const SUFFIX = ' ' + 'x'.repeat(16 * 1024);
/** The CLI's old-space limit (MB): well below the recording. */
const HEAP_CAP_MB = 40;

let app: TestApp;
let big: string;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-cli-export-'));

beforeAll(async () => {
  app = await startTestApp();
  big = (await createLongSession({ store: app.services.store, db: app.db }, EVENTS, { title: 'big export', answerSuffix: SUFFIX })).id;
}, 120_000);
afterAll(async () => {
  await app.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: Buffer; stderr: string }> {
  const child = spawn(process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, FORKLINE_URL: app.url, ...env },
  });
  const stdout: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => stdout.push(c));
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout: Buffer.concat(stdout), stderr })));
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

async function serverRecording(id: string): Promise<Buffer> {
  const res = await fetch(`${app.url.replace(/\/graphql$/, '/recordings')}?session=${id}`);
  expect(res.status).toBe(200);
  return Buffer.from(await res.arrayBuffer());
}

describe('forkline export', () => {
  it('streams a recording far larger than its heap to a file, with progress on stderr', async () => {
    const file = path.join(tmp, 'big.jsonl');
    const r = await cli(['export', big, '--output', file, '--progress'], { NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` });
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    expect(r.stdout.length).toBe(0);
    const bytes = fs.statSync(file).size;
    expect(bytes).toBeGreaterThan(HEAP_CAP_MB * 1.5 * 2 ** 20);

    // The server's bytes, exactly.
    const expected = await serverRecording(big);
    expect(bytes).toBe(expected.length);
    expect(sha256(fs.readFileSync(file))).toBe(sha256(expected));

    // Progress: counts that rise to the announced total, then the summary.
    const updates = r.stderr.split('\r').filter(Boolean);
    const counts = updates
      .map((u) => /^exporting \S+: ([\d,]+) of ([\d,]+) events \((\d+)%\), [\d.]+ MB$/.exec(u))
      .filter((m) => m !== null)
      .map((m) => ({ done: Number(m![1].replace(/,/g, '')), total: Number(m![2].replace(/,/g, '')), percent: Number(m![3]) }));
    expect(counts.length).toBeGreaterThan(0);
    for (const c of counts) expect(c.total).toBe(EVENTS);
    for (let i = 1; i < counts.length; i++) expect(counts[i].done).toBeGreaterThanOrEqual(counts[i - 1].done);
    expect(updates.at(-1)).toBe(`exported ${big}: ${EVENTS.toLocaleString('en')} events, ${(bytes / 2 ** 20).toFixed(1)} MB to ${file}\n`);
    console.log(
      `forkline export: ${(bytes / 2 ** 20).toFixed(1)} MB, ${EVENTS} events, CLI heap capped at ${HEAP_CAP_MB} MB, ${counts.length} progress updates`,
    );
  }, 180_000);

  it('writes to stdout what Session.recording holds, and nothing to stderr when it is not a terminal', async () => {
    const { createSession } = await app.ok('mutation { createSession(input: { title: "small export" }) { id } }');
    const r = await cli(['export', createSession.id]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { recording } }', { id: createSession.id });
    const text = r.stdout.toString('utf8');
    expect(text.trimEnd()).toBe(session.recording.trimEnd());
    expect(JSON.parse(text.split('\n')[0])).toMatchObject({ format: 'forkline.recording', version: 4 });
  });

  it('fails with the server’s code for an unknown session, leaving no file', async () => {
    const file = path.join(tmp, 'missing.jsonl');
    const r = await cli(['export', 'ses_missing', '--output', file]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^forkline: SESSION_NOT_FOUND: /);
    expect(fs.existsSync(file)).toBe(false);
  });
});
