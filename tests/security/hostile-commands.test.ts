// What a command can leave in a session's workspace, and what forkline then
// does with it (docs/files.md, docs/operations.md "Threat model": Files and
// workspaces). Real turns through the real service: the scripted model calls
// the shell (FORKLINE_SHELL=unsandboxed, so a command may also leave a process
// running after its call), and forkline's after-call scan, its recording of
// the change set and the restore of the directory act on what is there.
// Nothing may be read from or written to outside the workspace, nothing may
// hang the scan, and what is recorded is what a fork makes again — or the call
// is refused, saying why, and its changes are undone.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { detachedProcesses } from '../helpers/detached.ts';

const MAX_ENTRIES = 200;
const MAX_BYTES = 100_000;

let app: TestApp;
let base: string;
let root: string;
/** Processes a command left running: each test ends them. */
const processes = detachedProcesses(() => base);
const detached = (script: string) => processes.start(script);

beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-commands-'));
  root = path.join(base, 'ws');
  app = await startTestApp({ workspacesDir: root, shell: 'unsandboxed', workspaceLimits: { maxFiles: MAX_ENTRIES, maxBytes: MAX_BYTES } });
});
afterEach(() => processes.endAll());
afterAll(async () => {
  await app.close();
  fs.rmSync(base, { recursive: true, force: true });
});

const { create, turn, log, results } = agentTurns(() => app, 'hostile commands');
const shell = (command: string) => `!call shell ${JSON.stringify({ command })}`;
const call = (name: string, args: unknown) => `!call ${name} ${JSON.stringify(args)}`;
const steps = (...calls: string[]) => calls.join('\n!then\n');
const changeSets = async (id: string) => (await log(id)).filter((e) => e.type === 'plugin/files/change').length;
/** Every name under a directory (symlinks and FIFOs too), relative to it; names that are not UTF-8 as Node decodes them. */
const namesUnder = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true }).map(String).sort() : []);

async function lastResults(id: string, n: number) {
  return (await results(id)).slice(-n);
}

describe('special files a command leaves', () => {
  it('a FIFO, a socket or a device node makes the call an error naming it; nothing is recorded and the directory is made again without it', async () => {
    for (const [kind, command] of [
      ['FIFO', 'mkfifo pipe'],
      ['socket', `python3 -c "import socket; socket.socket(socket.AF_UNIX).bind('pipe')"`],
      ['device node', 'mknod pipe c 1 3'],
    ]) {
      const id = await create();
      await turn(id, steps(shell(`echo kept > a.txt; ${command}`), call('list_files', {})));
      const [[, status, content], listed] = await lastResults(id, 2);
      expect(status, kind).toBe('error');
      expect(content).toContain(`a ${kind} was left at "pipe"`);
      expect(await changeSets(id)).toBe(0);
      // What the log holds is what is on disk again: no FIFO for a later reader to block on.
      expect(listed.slice(1)).toEqual(['ok', 'no files']);
      expect(namesUnder(path.join(root, id))).toEqual([]);
    }
  });

  it('symlinks count toward the entries of the quota', async () => {
    const id = await create();
    await turn(id, shell(`i=0; while [ $i -lt ${MAX_ENTRIES + 10} ]; do ln -s /etc/passwd l$i; i=$((i+1)); done`));
    const [[, status, content]] = await lastResults(id, 1);
    expect(status).toBe('error');
    expect(content).toContain(`the workspace quota is ${MAX_ENTRIES} files and directories`);
    expect(await changeSets(id)).toBe(0);
  });
});

describe('names a command leaves', () => {
  it('a directory whose name is not UTF-8 does not hide its files from the quota: the call is refused and undone', async () => {
    const id = await create();
    // Three times the byte quota, under a name the scan cannot spell.
    await turn(id, steps(shell(`d=$(printf 'd\\377'); mkdir "$d"; head -c ${3 * MAX_BYTES} /dev/zero > "$d/big"`), call('list_files', {})));
    const [[, status, content], listed] = await lastResults(id, 2);
    expect(status).toBe('error');
    expect(content).toMatch(/a file was left at "d\uFFFD", which cannot be recorded \(its name is not UTF-8\)/);
    expect(listed.slice(1)).toEqual(['ok', 'no files']);
    expect(namesUnder(path.join(root, id))).toEqual([]);
  });

  it('a directory chain deeper than PATH_MAX is refused, and the workspace is made again after it', async () => {
    // Within the default quota of entries: only its depth refuses it.
    const roomy = await startTestApp({ databaseUrl: app.db.url, workspacesDir: path.join(base, 'roomy'), shell: 'unsandboxed' });
    const { create, turn, results } = agentTurns(() => roomy, 'deep');
    const lastResults = async (id: string, n: number) => (await results(id)).slice(-n);
    onTestFinished(() => roomy.close());
    const id = await create();
    // Three chains of 1,000 nested by `mv`: each command's paths stay short, the chain does not.
    const command = `c=$(printf 'a/%.0s' $(seq 1000)); mkdir -p $c && mv a c1 && mkdir -p $c && mv c1 \${c}c1 && mv a c2 && mkdir -p $c && mv c2 \${c}c2 && echo deep`;
    await turn(id, steps(shell(command), call('write_file', { path: 'b.txt', content: 'after' }), call('list_files', {})));
    const [[, status, content], written, listed] = await lastResults(id, 3);
    expect(status).toBe('error');
    expect(content).toMatch(/^exit code 0\n--- stdout ---\ndeep\n[\s\S]*a directory was left at "a\/a\/a.*deeper than a path may be \(1024 characters\)/);
    expect(written.slice(1)).toEqual(['ok', 'created b.txt (5 bytes)']);
    expect(listed.slice(1)).toEqual(['ok', 'b.txt (5 bytes)']);
    expect(namesUnder(path.join(base, 'roomy', id))).toEqual(['b.txt']);
  });
});

describe('a process still running in the workspace', () => {
  it('cannot send a restore of the directory outside it by putting a symlink in place of a directory', async () => {
    const outside = path.join(base, 'outside');
    fs.mkdirSync(outside);
    const id = await create();
    // The log holds 150 files in sub/; a call the scan refuses (a FIFO) leaves the directory to be made again.
    await turn(id, shell(`mkdir sub && i=0; while [ $i -lt 150 ]; do echo $i > sub/f$i; i=$((i+1)); done`));
    expect(await changeSets(id)).toBe(1);
    // Whenever sub/ is a real directory with a file in it (a restore's check passed, and it is writing), it is
    // moved aside and a symlink to outside/ takes its place.
    const swapper = detached(`
      const fs = require('fs'); const ws = process.argv.at(-1); let n = 0;
      setImmediate(function loop() {
        for (let i = 0; i < 200; i++) {
          try { if (fs.lstatSync(ws + '/sub').isDirectory() && fs.readdirSync(ws + '/sub').length) { fs.renameSync(ws + '/sub', ws + '/moved' + n++); fs.symlinkSync(${JSON.stringify(outside)}, ws + '/sub'); } } catch {}
        }
        setImmediate(loop);
      });`);
    await turn(id, steps(shell(`${swapper}; head -c ${MAX_BYTES + 1} /dev/zero > refused`), call('list_files', {}), call('list_files', {})));
    const [[, status, content]] = await lastResults(id, 3);
    expect(status).toBe('error');
    expect(content).toContain(`the workspace quota is ${MAX_BYTES} bytes`);
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('cannot make the scan read a file outside the workspace by swapping a file for a symlink, nor make it hang on a FIFO', async () => {
    const secret = `secret-${Math.random()}`;
    const secretFile = path.join(base, 'secret.txt');
    fs.writeFileSync(secretFile, secret);
    const fifo = path.join(base, 'fifo');
    const id = await create();
    // z/x.txt is a regular file for 3 ms, then for 3 ms a symlink to the secret or to a FIFO outside, and again.
    const swapper = detached(`
      const fs = require('fs'); const ws = process.argv.at(-1); const pause = new Int32Array(new SharedArrayBuffer(4));
      require('child_process').execFileSync('mkfifo', [${JSON.stringify(fifo)}]);
      for (let n = 0, end = Date.now() + 20000; Date.now() < end; n++) {
        try { fs.mkdirSync(ws + '/z', { recursive: true }); fs.writeFileSync(ws + '/z/t1', 'innocent ' + n); fs.renameSync(ws + '/z/t1', ws + '/z/x.txt'); } catch {}
        Atomics.wait(pause, 0, 0, 3);
        try { fs.symlinkSync(n % 2 ? ${JSON.stringify(secretFile)} : ${JSON.stringify(fifo)}, ws + '/z/t2'); fs.renameSync(ws + '/z/t2', ws + '/z/x.txt'); } catch {}
        Atomics.wait(pause, 0, 0, 3);
      }`);
    // 100 files rewritten by every call: the scan reads them all between its stat of z/x.txt and its read of it.
    const rewrite = 'i=0; while [ $i -lt 100 ]; do echo $RANDOM > f$i; i=$((i+1)); done';
    await turn(id, shell(`mkdir z; ${rewrite}; ${swapper}`));
    // Every turn ends: no scan waits on the FIFO.
    for (let round = 0; round < 6; round++) await turn(id, steps(...Array.from({ length: 5 }, () => shell(rewrite))));
    const stored = await app.db.pool.query('SELECT 1 FROM "FileBlob" WHERE hash = $1', [createHash('sha256').update(secret).digest('hex')]);
    expect(stored.rowCount).toBe(0);
    const outcomes = (await results(id)).map(([, status, content]) => `${status}: ${String(content).split('\n').at(-1)}`);
    expect(outcomes.join('\n')).not.toContain(secret);
  });
});
