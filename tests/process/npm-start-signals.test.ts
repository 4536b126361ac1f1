// `npm start` under a container runtime or a service manager: the signal goes
// to npm's process. It must reach the server, which stops the HTTP server and
// the embedded Postgres. npm runs the script with `sh -c`;
// a shell that stays in between let npm exit and left both running.
// The script also caps glibc's malloc arenas unless the operator set
// MALLOC_ARENA_MAX (docs/operations.md, Configuration).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isProcessAlive } from '../../src/pid-alive.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';

const folders: string[] = [];
const leftovers: number[] = [];
afterAll(() => {
  for (const pid of leftovers) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
  for (const f of folders) fs.rmSync(f, { recursive: true, force: true });
});

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });

describe('npm start', () => {
  // The operator's MALLOC_ARENA_MAX, and what the server runs with.
  const arenaMax = { SIGTERM: { set: undefined, runs: '2' }, SIGINT: { set: '8', runs: '8' } };
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`stops the server and its embedded Postgres on ${signal} sent to npm's process (MALLOC_ARENA_MAX ${arenaMax[signal].runs})`, async () => {
      const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-npm-start-'));
      fs.chmodSync(dataDir, 0o755); // the embedded Postgres runs as another user when we are root
      folders.push(dataDir);
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries({
        ...process.env,
        PORT: '0',
        FORKLINE_DATA_DIR: dataDir,
        DATABASE_URL: undefined,
        MALLOC_ARENA_MAX: arenaMax[signal].set,
      }))
        if (v !== undefined) env[k] = v;
      // --ignore-scripts skips prestart's build (the suite has built) and still runs `start`.
      const npm = spawn('npm', ['start', '--ignore-scripts'], { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      npm.stdout.on('data', (c) => (out += c));
      npm.stderr.on('data', (c) => (out += c));
      const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
      const serving = await waitFor(() => /"pid":(\d+),[^\n]*serving GraphQL and GraphiQL at http:\/\/[^:]+:(\d+)\//.exec(out), {
        timeoutMs: 60_000,
        what: `the service to start:\n${out}`,
      });
      const serverPid = Number(serving[1]);
      const port = Number(serving[2]);
      const postgresPid = Number(fs.readFileSync(path.join(dataDir, 'pg', 'postmaster.pid'), 'utf8').split('\n')[0]);
      leftovers.push(serverPid, postgresPid);
      expect(await portOpen(port)).toBe(true);
      expect(isProcessAlive(postgresPid)).toBe(true);
      expect(fs.readFileSync(`/proc/${serverPid}/environ`, 'utf8').split('\0')).toContain(`MALLOC_ARENA_MAX=${arenaMax[signal].runs}`);

      npm.kill(signal);
      const stillRunning = new Promise<string>((r) => setTimeout(() => r('npm still running'), 30_000).unref());
      expect(await Promise.race([exited, stillRunning])).toBe(0);
      await waitFor(async () => !(await portOpen(port)) && !isProcessAlive(serverPid) && !isProcessAlive(postgresPid), {
        what: `the port, the server (pid ${serverPid}) and Postgres (pid ${postgresPid}) to go`,
      });
      expect(out).toContain('"msg":"stopped"');
      expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false); // Postgres stopped cleanly
    }, 90_000);
  }
});
