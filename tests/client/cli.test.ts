// `npx forkline …` against a real server: every command, exit codes and error codes.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

let app: TestApp;
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-cli-'));
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

/** Runs the CLI (through tsx directly; one test goes through `npx forkline`). */
function cli(args: string[], opts: { npx?: boolean; env?: Record<string, string>; onOutput?: (stdout: string, stop: () => void) => void } = {}): Promise<Run> {
  const [cmd, argv] = opts.npx ? ['npx', ['forkline', ...args]] : [process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, ...args]];
  const child = spawn(cmd, argv as string[], { cwd: PROJECT_ROOT, env: { ...process.env, FORKLINE_URL: app.url, ...opts.env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => {
    stdout += c;
    opts.onOutput?.(stdout, () => child.kill('SIGINT'));
  });
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const lines = (s: string) => s.trim().split('\n').filter(Boolean);

describe('forkline CLI', () => {
  let id: string;
  let childId: string;

  it('sends a message and streams the answer until its turn ends (--wait)', async () => {
    id = (await app.ok(`mutation { createSession(input: { title: "cli" }) { id } }`)).createSession.id;
    const r = await cli(['send', id, '!slow 10\nanswer me in a few words', '--wait']);
    expect(r.stderr).toContain('[turn 1 completed]');
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('Echo: answer me in a few words');
  });

  it('lists sessions (through npx forkline), prints events, follows live ones', async () => {
    const [sessions, events] = await Promise.all([cli(['sessions'], { npx: true }), cli(['events', id, '--after', '4'])]);
    expect(sessions.code).toBe(0);
    expect(sessions.stdout).toMatch(new RegExp(`${id}\\s+IDLE\\s+8 events\\s+1 turns\\s+cli`));
    expect(lines(events.stdout).map((l) => JSON.parse(l).seq)).toEqual([5, 6, 7]);
    expect(JSON.parse(lines(events.stdout)[2])).toEqual({ seq: 7, type: 'turn/end', data: { turn: 1, reason: 'completed' } });

    let appended = false;
    const f = await cli(['events', id, '--after', '6', '--follow'], {
      onOutput: (out, stop) => {
        if (out.includes('"seq":8')) stop();
        else if (out.includes('"seq":7') && !appended) {
          appended = true; // caught up, so listening: what is appended now arrives live
          void app.services.store.append(id, [{ type: 'session/title', data: { title: 'renamed' } }]);
        }
      },
    });
    expect(lines(f.stdout).map((l) => JSON.parse(l).seq)).toEqual([7, 8]);
  });

  it('forks, branches, exports and imports', async () => {
    const [fork, branch] = await Promise.all([cli(['fork', id, '--at', '4', '--title', 'child', '--json']), cli(['branch', id])]);
    expect(fork.code).toBe(0);
    const f = JSON.parse(fork.stdout);
    childId = f.session.id;
    expect(f).toMatchObject({ cutSeq: 4, session: { title: 'child', parent: { id } } });
    expect(f.syntheticEvents.map((e: any) => e.type)).toEqual(['step/end', 'turn/end']);

    expect(branch.code).toBe(0);
    expect(branch.stdout).toContain('cut at seq 7; 0 synthetic closer(s)');

    const exported = await cli(['export', childId]);
    expect(exported.code).toBe(0);
    const recording = lines(exported.stdout);
    expect(JSON.parse(recording[0])).toMatchObject({ format: 'forkline.recording', version: 4, session: { id: childId } });
    const file = path.join(tmp, 'child.jsonl');
    fs.writeFileSync(file, exported.stdout);
    const imported = await cli(['import', file, '--json']);
    expect(imported.code).toBe(0);
    const s = JSON.parse(imported.stdout);
    expect(s.id).not.toBe(childId);
    expect(s.eventCount).toBe(recording.length - 1);
  });

  it('deletes a session; one with children only with --with-descendants', async () => {
    const { forkSession } = await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 2 }) { session { id } } }`, { id: childId });
    const refused = await cli(['delete', childId]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/^forkline: SESSION_HAS_CHILDREN: /);
    const deleted = await cli(['delete', childId, '--with-descendants', '--json']);
    expect(deleted.code).toBe(0);
    expect(new Set(JSON.parse(deleted.stdout).deletedSessionIds)).toEqual(new Set([childId, forkSession.session.id]));
    const gone = await cli(['events', childId]);
    expect(gone.stderr).toMatch(/SESSION_NOT_FOUND/);
  });

  it('fails clearly: GraphQL error codes, usage errors, unreachable server', async () => {
    const [missing, range, usage, badInt, down, noFile] = await Promise.all([
      cli(['events', 'ses_missing', '--follow']),
      cli(['fork', id, '--at', '999']),
      cli(['send', id]),
      cli(['fork', id, '--at', 'x']),
      cli(['sessions', '--url', 'http://127.0.0.1:9/graphql']),
      cli(['import', path.join(tmp, 'nope.jsonl')]),
    ]);
    expect(missing).toMatchObject({ code: 1, stdout: '' });
    expect(missing.stderr).toMatch(/^forkline: SESSION_NOT_FOUND: session ses_missing not found/);
    expect(range.code).toBe(1);
    expect(range.stderr).toMatch(/^forkline: SEQ_OUT_OF_RANGE: /);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('expected a session id and a text');
    expect(badInt.code).toBe(2);
    expect(badInt.stderr).toContain('--at must be an integer');
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(/^forkline: NETWORK_ERROR: cannot reach/);
    expect(noFile.code).toBe(1);
    expect(noFile.stderr).toContain('ENOENT');
    const bad = path.join(tmp, 'bad.jsonl');
    fs.writeFileSync(bad, '{"format":"forkline.recording","version":4,"session":{"id":"s","title":"t"}}\n{"seq":0,"type":"turn/pause","data":{}}\n');
    const rejected = await cli(['import', bad]);
    expect(rejected.code).toBe(1);
    expect(rejected.stderr).toMatch(/^forkline: BAD_USER_INPUT: line 2: /);
  });
});
