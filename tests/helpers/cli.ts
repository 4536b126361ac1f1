// Runs `client/cli.ts` (the `forkline` command) as a subprocess against a test server.
import { spawn } from 'node:child_process';
import { PROJECT_ROOT } from './process.ts';

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

/** `forkline <args>` with FORKLINE_URL set to `url` (and `env` added). */
export function runCli(url: string, args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, ...args], { cwd: PROJECT_ROOT, env: { ...process.env, FORKLINE_URL: url, ...env } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

export const outputLines = (s: string) => s.trim().split('\n').filter(Boolean);
