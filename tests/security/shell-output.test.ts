// What a command's output may make forkline hold (docs/operations.md "Memory
// and time"): the real service (`src/main.ts`), the scripted model calling
// `shell` in real turns, in bubblewrap (FORKLINE_SHELL=on) and without it
// (FORKLINE_SHELL=unsandboxed), while its memory is sampled and /healthz timed
// (tests/helpers/under-watch.ts). Output is cut while it is read, what the
// log keeps is text a person and a model can read, and a command is over
// when it exits (what it left running is killed) or at the tool timeout.
// What it writes is bounded while it runs, not only once it is over: a file
// at the per-file cap, the workspace at its quota, the sandbox's memory
// (its /tmp and /dev/shm) at FORKLINE_SANDBOX_TMP_BYTES.
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { underWatch } from '../helpers/under-watch.ts';
import { waitFor } from '../helpers/wait.ts';

const shell = (command: string) => `!call shell ${JSON.stringify({ command })}`;
/** The processes on this machine whose command line holds `marker`. */
const pidsOf = (marker: string) =>
  execFileSync('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .filter((l) => l.includes(marker) && !l.includes('ps -eo'))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
const running = (marker: string) => pidsOf(marker).length > 0;

describe.each(['on', 'unsandboxed'] as const)('shell output (FORKLINE_SHELL=%s)', (mode) => {
  let service: ServiceProcess;
  let base: string;

  beforeAll(async () => {
    service = await startService({
      env: { DATABASE_URL: await createTestDatabase(), FORKLINE_SHELL: mode, FORKLINE_API_TOKENS: undefined, MODEL_PROVIDER: 'scripted' },
    });
    base = service.url.replace(/\/graphql$/, '');
  }, 120_000);
  afterAll(async () => {
    await service?.stop();
  });

  const gql = async (query: string, variables?: unknown) => {
    const r = await postGraphQL(service.url, query, variables);
    if (r.body.errors) throw new Error(JSON.stringify(r.body.errors));
    return r.body.data;
  };

  /** A new session's turn running `command`: its shell result once the turn ended, and how long it took. */
  async function run(command: string): Promise<{ status: string; content: string; ms: number }> {
    const id = (await gql('mutation { createSession(input: { title: "shell" }) { id } }')).createSession.id as string;
    const started = Date.now();
    await gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text: shell(command) } });
    const result = await waitFor(
      async () => {
        const page = await gql('query($id: ID!) { session(id: $id) { events(first: 200) { edges { node { type data } } } } }', { id });
        const events = page.session.events.edges.map((e: any) => e.node);
        return events.some((e: any) => e.type === 'turn/end') ? events.find((e: any) => e.type === 'tool/result')?.data : null;
      },
      { what: 'the turn to end', timeoutMs: 60_000 },
    );
    return { status: result.status, content: result.content, ms: Date.now() - started };
  }

  it('300 MB of output is cut while it is read: 64 KiB kept of each stream, the cut said so, memory flat', async () => {
    const { result, growthMB, slowestHealthzMs } = await underWatch(service.child.pid!, base, () =>
      run('head -c 300000000 /dev/zero | tr "\\0" a; head -c 300000 /dev/zero | tr "\\0" e >&2; echo done >&2'),
    );
    console.log(`300 MB of stdout (${mode}): ${result.ms} ms, RSS +${Math.round(growthMB)} MB, slowest /healthz ${Math.round(slowestHealthzMs)} ms`);
    expect(result.status).toBe('ok');
    expect(result.content).toContain(`--- stdout ---\n${'a'.repeat(64 * 1024)}\n[cut: ${300_000_000 - 64 * 1024} more bytes were not kept]`);
    expect(result.content).toContain(`[cut: ${300_005 - 64 * 1024} more bytes were not kept]`);
    expect(result.content.length).toBeLessThan(140_000);
    expect(growthMB).toBeLessThan(150);
    expect(slowestHealthzMs).toBeLessThan(2000);
  });

  it('invalid UTF-8, NUL, controls and terminal escapes are kept as visible text, never as what a terminal obeys', async () => {
    const { status, content } = await run(
      "printf 'a\\377b\\0c\\033[31mred\\033[0m\\033]52;c;aGVsbG8=\\007\\033]0;title\\007 \\033[2J\\r\\nover\\rwrite\\bz\\n'",
    );
    expect(status).toBe('ok');
    expect(content).toBe('exit code 0\n--- stdout ---\na\uFFFDb\\x00cred \nover\\x0dwrite\\x08z\n');
    // eslint-disable-next-line no-control-regex -- no control character but newlines survives
    expect(content).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
  });

  it('a background job still writing after the command exits is killed; the call is over when the command is', async () => {
    const marker = `bg-${randomUUID()}`;
    // "started" first: the writer fills the 64 KiB kept of stdout before a later echo on a loaded machine.
    const { status, content, ms } = await run(`echo started; (while :; do echo ${marker}; done) & sh -c 'while :; do sleep 1; done' ${marker} &`);
    expect(status).toBe('ok');
    expect(content.split('\n')).toContain('started');
    expect(content.length).toBeLessThan(140_000);
    // Over when the command was: 'ok', where a call held until the tool timeout ends 'error', "timed out after 30000 ms" (below).
    console.log(`the call with a background writer: ${ms} ms`);
    await waitFor(async () => !running(marker), { what: 'the background jobs to be gone', timeoutMs: 5000 });
  });

  it('a process that left the group and holds the output open does not hold the call', async () => {
    const marker = `setsid-${randomUUID()}`;
    const { status, content, ms } = await run(`setsid sh -c 'while :; do sleep 1; done' ${marker} & echo started`);
    // 'ok': over when the command was, not held until the tool timeout (which ends it 'error', below).
    expect({ status, content }).toEqual({ status: 'ok', content: 'exit code 0\n--- stdout ---\nstarted\n' });
    console.log(`the call with a setsid process holding its output: ${ms} ms`);
    if (mode === 'on') {
      // The sandbox's PID namespace ends with the command: nothing it started survives.
      await waitFor(async () => !running(marker), { what: 'the process to be gone', timeoutMs: 5000 });
    } else {
      // Without a sandbox it lives on (docs/operations.md says so): this test's own process, ended here.
      for (const pid of pidsOf(marker)) process.kill(pid, 'SIGKILL');
    }
  });

  it('a file a command writes stops at the per-file cap as it is written: no `fallocate` takes the disk', async () => {
    const { status, content } = await run(
      'fallocate -l 1G big.bin; echo "fallocate $?"; head -c 20000000 /dev/zero > w.bin; echo "head $?"; wc -c < w.bin; rm -f big.bin w.bin',
    );
    // Before: "fallocate 0", "head 0", 20000000 (1 GB of the disk taken at once, refused only once the command was over).
    expect(status).toBe('ok');
    expect(content).toMatch(/^exit code 0\n--- stdout ---\nfallocate 153\nhead 153\n10485760\n/);
    expect(content).toContain('File size limit exceeded');
  });

  it('a command filling the workspace past its quota is stopped while it runs, its files undone', async () => {
    const { status, content, ms } = await run('i=0; while [ $i -lt 200 ]; do i=$((i+1)); fallocate -l 10M f$i; sleep 0.05; done; echo "wrote $i files"');
    console.log(`a command filling the disk with 10 MiB files (${mode}): stopped after ${ms} ms`);
    // Before: the loop ran to its end (2 GB of the disk held), refused only once it was over ("exit code 0 … wrote 200 files").
    expect(status).toBe('error');
    expect(content).toMatch(/^stopped: it came to hold \d+ bytes of the disk while it ran, past what the workspace quota allows \(104857600 bytes/);
    expect(content).not.toContain('wrote 200 files');
    expect(content).toMatch(/the call's file changes were undone\)$/);
  });

  it("a command making files past the quota's entries is stopped while it runs, its files undone", async () => {
    const { status, content, ms } = await run(
      'i=0; while [ $i -lt 60 ]; do i=$((i+1)); seq -f "f$i-%g" 1 1000 | xargs touch; sleep 0.05; done; echo "made $i thousand files"',
    );
    console.log(`a command making 60,000 empty files (${mode}): stopped after ${ms} ms`);
    // Before: the loop ran to its end (60,000 inodes held), refused only once it was over ("exit code 0 … made 60 thousand files").
    expect(status).toBe('error');
    expect(content).toMatch(/^stopped: it came to hold \d+ files and directories while it ran, past the workspace quota of 20000/);
    expect(content).not.toContain('made 60 thousand files');
    expect(content).toMatch(/the call's file changes were undone\)$/);
  });

  if (mode === 'on') {
    it("the sandbox's /tmp and /dev/shm hold FORKLINE_SANDBOX_TMP_BYTES each (they are memory); its root and /dev are read-only, and it mounts nothing of its own", async () => {
      const fill =
        'fill() { i=0; while [ $i -lt 100 ]; do i=$((i+1)); head -c 1048576 /dev/zero > "$1/f$i" 2>/dev/null || break; done; echo "$1 $(du -skx "$1" | cut -f1)"; }';
      const { status, content } = await run(
        `${fill}; fill /tmp; fill /dev/shm; (echo x > /scratch) 2>/dev/null; echo "root $?"; (echo x > /dev/scratch) 2>/dev/null; echo "dev $?"; ` +
          'mkdir m; unshare -rm sh -c \'mount -t tmpfs none "$PWD/m" && echo mounted\' 2>/dev/null; echo "userns $?"',
      );
      expect(status).toBe('ok');
      // Before: 100 MiB in each ("/tmp 102400", "/dev/shm 102400": half the machine's memory was the bound) and "root 0", "dev 0".
      const held = Object.fromEntries([...content.matchAll(/^(\S+) (\d+)$/gm)].map((m) => [m[1], Number(m[2])]));
      expect(held['/tmp']).toBeGreaterThan(60 * 1024);
      expect(held['/tmp']).toBeLessThanOrEqual(64 * 1024);
      expect(held['/dev/shm']).toBeGreaterThan(60 * 1024);
      expect(held['/dev/shm']).toBeLessThanOrEqual(64 * 1024);
      expect(held.root).toBeGreaterThan(0);
      expect(held.dev).toBeGreaterThan(0);
      // Before: "mounted", "userns 0": a user namespace of its own let it mount a tmpfs of no bound in the workspace.
      expect(content).not.toContain('mounted');
      expect(held.userns).toBeGreaterThan(0);
    });
  }

  it('a command that never exits nor writes a newline is stopped at the tool timeout, with everything it started', async () => {
    const marker = `forever-${randomUUID()}`;
    const { result, slowestHealthzMs } = await underWatch(service.child.pid!, base, () => run(`sh -c 'while :; do printf xxxxxxxxxxxxxxxx; done' ${marker}`));
    expect(result).toMatchObject({ status: 'error', content: 'timed out after 30000 ms' });
    expect(slowestHealthzMs).toBeLessThan(2000);
    await waitFor(async () => !running(marker), { what: 'the command to be gone', timeoutMs: 5000 });
  }, 90_000);
});
