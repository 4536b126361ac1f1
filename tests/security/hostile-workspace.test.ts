// Paths checked again where the file tools act (docs/files.md "Paths",
// docs/operations.md "Threat model": Files and workspaces). A command, or a
// process it left running, shares the workspace with forkline's file tools
// and scans: it can put symlinks, FIFOs and files of any size where a path was
// checked, between the check and the act. Real turns through the real
// service, the scripted model calling: the shell in bubblewrap for what a
// sandboxed command can make, unsandboxed where a process must outlive its call
// (as a workspace MCP server's children do). Nothing outside the workspace may
// be opened, read, written or looked up, and no call may hang or hold memory
// past the quota.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { detachedProcesses } from '../helpers/detached.ts';
import { probeServer } from '../helpers/probe-mcp.ts';

const MAX_BYTES = 100_000;
const MAX_FILE_BYTES = 10 * 1024 * 1024;

let base: string;
/** Where nothing may be created, opened or looked at. */
let outside: string;
let boxed: TestApp;
let open: TestApp;
const processes = detachedProcesses(() => base);
/** FIFO writers the tests started: each is blocked until something opens its FIFO. */
const writers: ChildProcess[] = [];

beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-workspace-'));
  outside = path.join(base, 'outside');
  fs.mkdirSync(outside);
  boxed = await startTestApp({ workspacesDir: path.join(base, 'boxed'), shell: 'on', mcp: { mcpServers: { probe: probeServer(true) } } });
  open = await startTestApp({
    databaseUrl: boxed.db.url,
    workspacesDir: path.join(base, 'open'),
    shell: 'unsandboxed',
    workspaceLimits: { maxBytes: MAX_BYTES, maxFileBytes: MAX_FILE_BYTES },
    mcp: { mcpServers: { probe: probeServer(false) } },
  });
});
afterEach(() => {
  processes.endAll();
  for (const w of writers.splice(0)) w.kill('SIGKILL');
});
afterAll(async () => {
  await open?.close();
  await boxed?.close();
  fs.rmSync(base, { recursive: true, force: true });
});

const call = (name: string, args: unknown) => `!call ${name} ${JSON.stringify(args)}`;
const shell = (command: string) => call('shell', { command });
const steps = (...calls: string[]) => calls.join('\n!then\n');
const boxedTurns = agentTurns(() => boxed, 'hostile workspace');
const openTurns = agentTurns(() => open, 'hostile workspace');

/** A process blocked writing to the FIFO `fifo` (made here): it ends only once something opens the FIFO to read. */
function blockedWriter(fifo: string): ChildProcess {
  execFileSync('mkfifo', [fifo]);
  const w = spawn('sh', ['-c', `printf opened > '${fifo}'`], { stdio: 'ignore' });
  writers.push(w);
  return w;
}

describe('a symlink a sandboxed command leaves', () => {
  it('is followed only while it stays inside: one that leads out is refused without a look at where it leads (what exists there and what does not answer alike)', async () => {
    fs.writeFileSync(path.join(outside, 'exists.txt'), 'host secret');
    fs.mkdirSync(path.join(outside, 'dir'));
    const id = await boxedTurns.create();
    const command = [
      // Absolute host paths: the sandbox does not see them, forkline would.
      `ln -s ${outside}/exists.txt file-there`,
      `ln -s ${outside}/missing.txt file-missing`,
      `ln -s ${outside}/dir dir-there`,
      `ln -s ${outside}/nodir dir-missing`,
      // Relative, out through the workspaces' root (in the sandbox, `..` is an empty directory).
      `ln -s ../../outside/exists.txt up-there`,
      `ln -s ../../outside/missing.txt up-missing`,
      // Inside: by a relative path, through `..`, and by the workspace's own absolute path.
      'echo inside > real.txt && mkdir d && ln -s ../real.txt d/up && ln -s "$PWD/real.txt" absolute && ln -s d/up twice',
      'ln -s loop-b loop-a && ln -s loop-a loop-b',
      // A hard link to a file of the host: the workspace is a mount of its own, so none can be made.
      'ln /usr/bin/env hard; echo "hard link: $?"',
    ].join('; ');
    await boxedTurns.turn(
      id,
      steps(
        shell(command),
        ...['file-there', 'file-missing', 'up-there', 'up-missing', 'dir-there/x', 'dir-missing/x'].map((p) => call('read_file', { path: p })),
        call('list_files', { path: 'dir-there' }),
        call('list_files', { path: 'dir-missing' }),
        call('write_file', { path: 'dir-there/new.txt', content: 'escaped' }),
        call('write_file', { path: 'dir-missing/new.txt', content: 'escaped' }),
        ...['d/up', 'absolute', 'twice', 'loop-a'].map((p) => call('read_file', { path: p })),
      ),
    );
    const [[, shellStatus, shellOut], ...answers] = await boxedTurns.results(id);
    expect(shellStatus).toBe('ok');
    expect(shellOut).toContain('hard link: 1');
    expect(shellOut).toContain('Invalid cross-device link');
    const out = (p: string) => `"${p}" leads outside the workspace`;
    expect(answers.map(([, status, content]) => [status, content])).toEqual([
      ['error', out('file-there')],
      ['error', out('file-missing')],
      ['error', out('up-there')],
      ['error', out('up-missing')],
      ['error', out('dir-there/x')],
      ['error', out('dir-missing/x')],
      ['error', out('dir-there')],
      ['error', out('dir-missing')],
      ['error', out('dir-there/new.txt')],
      ['error', out('dir-missing/new.txt')],
      ['ok', 'inside\n'],
      ['ok', 'inside\n'],
      ['ok', 'inside\n'],
      ['error', '"loop-a" leads through a symlink loop'],
    ]);
    expect(fs.readdirSync(outside).sort()).toEqual(['dir', 'exists.txt']);
    expect(fs.readdirSync(path.join(outside, 'dir'))).toEqual([]);
  });
});

describe('a FIFO where a file tool reads', () => {
  it('is found, never opened: the call answers at once, and a writer waiting on it stays blocked', async () => {
    const id = await openTurns.create();
    await openTurns.turn(id, call('write_file', { path: 'a.txt', content: 'a' }));
    // Standing in for a process still running in the workspace, after the call's scan.
    const writer = blockedWriter(path.join(base, 'open', id, 'pipe'));
    await openTurns.turn(
      id,
      steps(call('read_file', { path: 'pipe' }), call('list_files', { path: 'pipe' }), call('edit_file', { path: 'pipe', oldText: 'a', newText: 'b' })),
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(writer.exitCode).toBeNull();
    expect((await openTurns.results(id)).slice(-3)).toEqual([
      ['read_file', 'error', '"pipe" is not a regular file'],
      ['list_files', 'error', '"pipe" is not a regular file'],
      ['edit_file', 'error', '"pipe" is not a regular file'],
    ]);
  });
});

describe('a directory swapped for a symlink while the file tools act', () => {
  it('leads nowhere: nothing outside is opened, looked at or written, whichever the tools meet', async () => {
    const fifoDir = path.join(outside, 'fifo-dir');
    const bigDir = path.join(outside, 'big-dir');
    fs.mkdirSync(fifoDir);
    fs.mkdirSync(bigDir);
    const writer = blockedWriter(path.join(fifoDir, 'x.txt'));
    fs.writeFileSync(path.join(bigDir, 'x.txt'), 'S'.repeat(7777));
    const id = await openTurns.create();
    // d is a real directory holding x.txt for ~100 µs, then a symlink to fifo-dir (x.txt a FIFO) or to big-dir (x.txt 7777 bytes),
    // and again; made again whenever the workspace is (a refused call's changes are undone by making it anew).
    const swapper = processes.start(`
      const fs = require('fs'); const ws = process.argv.at(-1); const attempt = (f) => { try { f(); } catch {} };
      const hold = () => { const end = process.hrtime.bigint() + 100000n; while (process.hrtime.bigint() < end); };
      for (let n = 0, end = Date.now() + 20000; Date.now() < end; n++) {
        // A write_file that made d/ again while it was away left it in the way.
        attempt(() => fs.rmSync(ws + '/real', { recursive: true, force: true }));
        attempt(() => fs.mkdirSync(ws + '/d'));
        // Whole or not at all (a link fails where x.txt exists, as 'wx' would): a file written in place is empty for a moment.
        attempt(() => { fs.writeFileSync(ws + '/.x-new', 'inside'); fs.linkSync(ws + '/.x-new', ws + '/d/x.txt'); });
        attempt(() => fs.unlinkSync(ws + '/.x-new'));
        attempt(() => fs.symlinkSync(${JSON.stringify(fifoDir)}, ws + '/l0'));
        attempt(() => fs.symlinkSync(${JSON.stringify(bigDir)}, ws + '/l1'));
        const l = ws + '/l' + (n % 2);
        attempt(() => { hold(); fs.renameSync(ws + '/d', ws + '/real'); fs.renameSync(l, ws + '/d'); hold(); fs.renameSync(ws + '/d', l); fs.renameSync(ws + '/real', ws + '/d'); });
      }`);
    await openTurns.turn(id, shell(swapper));
    const rounds = Array.from({ length: 20 }, () => [
      call('read_file', { path: 'd/x.txt' }),
      call('list_files', { path: 'd/x.txt' }),
      call('write_file', { path: 'd/y.txt', content: 'written' }),
    ]).flat();
    // One step of 60 calls a turn (a turn takes a bounded number of steps).
    for (let turn = 0; turn < 4; turn++) await openTurns.turn(id, rounds.join('\n'));
    const answers = (await openTurns.results(id)).slice(1);
    expect(answers).toHaveLength(4 * rounds.length);
    // Each answer is about the workspace's own d/, or refuses.
    const fine = ['inside', 'd/x.txt (6 bytes)', 'created d/y.txt (7 bytes)', 'wrote d/y.txt (7 bytes)'];
    for (const [name, status, content] of answers) {
      if (status === 'ok') expect(fine, name).toContain(content);
      else expect(String(content), name).not.toMatch(/7777|SSS/);
    }
    expect(answers.some(([, status]) => status === 'ok')).toBe(true);
    expect(writer.exitCode).toBeNull();
    expect(fs.readdirSync(fifoDir)).toEqual(['x.txt']);
    expect(fs.readdirSync(bigDir)).toEqual(['x.txt']);
  });
});

describe('a file that grows between the scan’s stat and its read', () => {
  it('is read only up to what is left of the quota: the call is refused, its memory bounded by the quota, not by what the files grew to', async () => {
    // 2,000 small files the scan reads one by one; once it has read one of them (its access time moves), the 40
    // named big* it has not read yet become 10 MiB each, the most one file may hold: after the scan's stat, before its read.
    const small = 2000;
    const big = 40;
    const id = await openTurns.create();
    const ready = path.join(base, 'grower-ready');
    const grower = processes.start(`
      const fs = require('fs'); const ws = process.argv.at(-1);
      const names = fs.readdirSync(ws).map((n) => ws + '/' + n);
      const atime = (n) => fs.statSync(n, { bigint: true }).atimeNs;
      const seen = new Map(names.map((n) => [n, atime(n)]));
      fs.writeFileSync(${JSON.stringify(ready)}, '');
      for (const end = Date.now() + 20000; Date.now() < end; ) {
        if (names.some((n) => atime(n) !== seen.get(n))) {
          for (const n of names) if (n.includes('/big') && atime(n) === seen.get(n)) fs.truncateSync(n, ${MAX_FILE_BYTES});
          break;
        }
      }`);
    const command = [
      `i=0; while [ $i -lt ${small} ]; do echo $i > s$i; i=$((i+1)); done`,
      `i=0; while [ $i -lt ${big} ]; do echo $i > big$i; i=$((i+1)); done`,
      grower,
      `while [ ! -e ${ready} ]; do sleep 0.05; done`,
    ].join('; ');
    const baseline = process.memoryUsage().arrayBuffers;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().arrayBuffers)), 1);
    try {
      await openTurns.turn(id, shell(command));
    } finally {
      clearInterval(sampler);
    }
    const [[, status, content]] = await openTurns.results(id);
    expect(status).toBe('error');
    expect(content).toContain(`the workspace quota is ${MAX_BYTES} bytes`);
    // What the big files came to at their read: 10 MiB each. What was held: the quota's 100 kB, with room for the process's own buffers.
    expect(peak - baseline).toBeLessThan(48 * 1024 * 1024);
  });
});

describe('a hard link to a file outside the workspace (left by a command run unsandboxed)', () => {
  it('is replaced, never written through, by write_file, edit_file, delete_file and a fork’s restore', async () => {
    const target = path.join(outside, 'linked.txt');
    fs.writeFileSync(target, 'host file');
    const id = await openTurns.create();
    await openTurns.turn(id, shell(`ln ${target} a.txt && ln ${target} b.txt && ln ${target} c.txt`));
    await openTurns.turn(
      id,
      steps(
        call('write_file', { path: 'a.txt', content: 'written' }),
        call('edit_file', { path: 'b.txt', oldText: 'host', newText: 'edited' }),
        call('delete_file', { path: 'c.txt' }),
      ),
    );
    expect((await openTurns.results(id)).slice(-3).map(([, status]) => status)).toEqual(['ok', 'ok', 'ok']);
    const { forkSession } = await open.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id });
    const child = forkSession.session.id as string;
    await openTurns.turn(child, call('list_files', {}));
    expect((await openTurns.results(child)).at(-1)).toEqual(['list_files', 'ok', 'a.txt (7 bytes)\nb.txt (11 bytes)']);
    expect(fs.readFileSync(target, 'utf8')).toBe('host file');
    expect(fs.statSync(target).nlink).toBe(1);
  });
});

describe('a workspace MCP server when its directory is made again (a refused call undone, a rewind)', () => {
  it('is started again in the new directory: its writes are recorded, not lost in the removed one', async () => {
    for (const [turns, sandboxed] of [
      [boxedTurns, true],
      [openTurns, false],
    ] as const) {
      const id = await turns.create();
      // A name no change set may hold (a backslash) refuses the second call: its changes are undone by making the directory again.
      await turns.turn(
        id,
        steps(
          call('probe__write', { name: 'one.txt', text: 'one' }),
          call('probe__write', { name: 'bad\\name', text: 'refused' }),
          call('probe__write', { name: 'two.txt', text: 'two' }),
          call('list_files', {}),
        ),
      );
      const [one, refused, two, listed] = await turns.results(id);
      expect(one.slice(1), `sandboxed: ${sandboxed}`).toEqual(['ok', `wrote ${path.join(base, sandboxed ? 'boxed' : 'open', id)}/one.txt`]);
      expect(refused[1]).toBe('error');
      expect(refused[2]).toContain('which cannot be recorded');
      expect(two.slice(1)).toEqual(['ok', `wrote ${path.join(base, sandboxed ? 'boxed' : 'open', id)}/two.txt`]);
      expect(listed.slice(1)).toEqual(['ok', 'one.txt (3 bytes)\ntwo.txt (3 bytes)']);
    }
  });
});
