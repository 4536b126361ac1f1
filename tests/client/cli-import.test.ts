// `forkline import` as a user runs it on a long recording: progress on stderr
// (a terminal, or --progress) for the upload and then for the server's import
// (which takes most of the time: a 200,000-event recording uploads in a second
// and imports for tens of seconds), a summary line, and for a bad line a clear
// error naming the line and the rule, with nothing imported. Before, the CLI
// printed nothing at all until the import had ended.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { longRecordingLines } from '../fixtures/recordings/recordings.ts';

/** Long enough that the server's import outlasts its progress interval (250 ms) on any machine. */
const EVENTS = 30_000;
const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

let app: TestApp;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-cli-import-'));
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, ...args], { cwd: PROJECT_ROOT, env: { ...process.env, FORKLINE_URL: app.url } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;
const number = (s: string) => Number(s.replace(/,/g, ''));

describe('forkline import', () => {
  it('shows the upload and then the server’s import as they progress, then a summary', async () => {
    const lines = longRecordingLines(EVENTS, 'cli import');
    const file = path.join(tmp, 'long.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const size = fs.statSync(file).size;
    const mb = (size / 2 ** 20).toFixed(1);

    const r = await cli(['import', file, '--progress']);
    expect(r.code, r.stderr.slice(-2000)).toBe(0);
    const updates = r.stderr.split('\r').filter(Boolean);
    // The server's side: lines checked and written, and bytes of the recording, rising.
    const importing = updates
      .map((u) => /^importing \S+: ([\d,]+) lines checked and written, ([\d.]+) of ([\d.]+) MB \((\d+)%\)$/.exec(u))
      .filter((m) => m !== null)
      .map((m) => ({ lines: number(m![1]), mb: Number(m![2]), total: m![3], percent: Number(m![4]) }));
    expect(importing.length, r.stderr).toBeGreaterThan(0);
    for (const p of importing) expect(p.total).toBe(mb);
    for (let i = 1; i < importing.length; i++) expect(importing[i].lines).toBeGreaterThanOrEqual(importing[i - 1].lines);
    expect(importing.at(-1)!.lines).toBeLessThanOrEqual(lines.length - 1);
    expect(updates.some((u) => /^uploaded \S+: [\d.]+ MB; importing…$/.test(u))).toBe(true);
    const summary = /^imported (ses_\S+): ([\d,]+) events, ([\d.]+) MB in [\d.]+ s\n$/.exec(updates.at(-1)!);
    expect(summary, updates.at(-1)).not.toBeNull();
    expect(number(summary![2])).toBe(lines.length - 1);
    expect(summary![3]).toBe(mb);
    // stdout keeps its one line: the session's summary.
    expect(r.stdout).toMatch(new RegExp(`^${summary![1]}\\b`));
  }, 120_000);

  it('a bad line after many good ones: exit 1 with the line and what is wrong, nothing imported', async () => {
    const before = await sessionCount();
    const lines = longRecordingLines(EVENTS, 'cli bad line');
    lines.push(JSON.stringify({ seq: lines.length - 1, type: 'turn/end', data: { turn: 999_999, reason: 'completed' } }));
    const file = path.join(tmp, 'bad.jsonl');
    fs.writeFileSync(file, `${lines.join('\n')}\n`);
    const r = await cli(['import', file, '--progress']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    const last = r.stderr.trimEnd().split('\n').at(-1);
    expect(last).toMatch(new RegExp(`^forkline: BAD_USER_INPUT: line ${lines.length}: turn bracket: turn/end of turn 999999`));
    expect(await sessionCount()).toBe(before);
  }, 120_000);

  it('prints no progress into a pipe unless asked', async () => {
    const file = path.join(tmp, 'quiet.jsonl');
    fs.writeFileSync(file, `${longRecordingLines(50, 'quiet').join('\n')}\n`);
    const r = await cli(['import', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
  });
});
