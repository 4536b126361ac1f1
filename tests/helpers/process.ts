// Runs the real service (`src/main.ts`, what `npm start` runs) as a child process.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export async function startService(
  opts: {
    cwd?: string;
    env?: Record<string, string | undefined>;
    timeoutMs?: number;
    /** The OS user it runs as (default: this process's); its data directory is made theirs. */
    user?: { uid: number; gid: number };
  } = {},
): Promise<ServiceProcess> {
  const env: Record<string, string> = {};
  // A data directory of its own unless the test names one: nothing is written into the project's .data.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-service-'));
  fs.chmodSync(dataDir, 0o755);
  if (opts.user) fs.chownSync(dataDir, opts.user.uid, opts.user.gid);
  for (const [k, v] of Object.entries({ ...process.env, PORT: '0', FORKLINE_DATA_DIR: dataDir, ...opts.env })) if (v !== undefined) env[k] = v;
  // `node --import tsx` runs the service in this very process (the tsx CLI would
  // add a parent process that a SIGKILL would not reach through).
  const child = spawn(process.execPath, ['--import', `${PROJECT_ROOT}node_modules/tsx/dist/loader.mjs`, `${PROJECT_ROOT}src/main.ts`], {
    cwd: opts.cwd ?? PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...opts.user,
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start in time:\n${out}`)), opts.timeoutMs ?? 60_000);
    const check = () => {
      const m = out.match(/serving GraphQL and GraphiQL at (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    child.stdout!.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`service exited with ${code} before serving:\n${out}`));
    });
  });
  return {
    url,
    child,
    output: () => out,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

export async function postGraphQL(url: string, query: string, variables?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query, variables }) });
  return { status: res.status, body: (await res.json()) as any };
}

/** A GraphQL operation that must answer without errors: its data. */
export async function okGraphQL(url: string, query: string, variables?: unknown) {
  const r = await postGraphQL(url, query, variables);
  if (r.body.errors) throw new Error(`GraphQL errors: ${JSON.stringify(r.body.errors).slice(0, 500)}`);
  return r.body.data;
}

/** Whether a process of this pid is there (one not yet reaped counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
