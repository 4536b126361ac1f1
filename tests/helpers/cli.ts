// The CLI (client/cli.ts) as a subprocess, run through tsx directly: what a
// shell user runs, with FORKLINE_URL (and any other variables) in its environment.
import { spawn } from 'node:child_process';
import { PROJECT_ROOT } from './process.ts';

const TSX = `${PROJECT_ROOT}node_modules/tsx/dist/cli.mjs`;

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(url: string, args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  const child = spawn(process.execPath, [TSX, `${PROJECT_ROOT}client/cli.ts`, ...args], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, FORKLINE_URL: url, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** A shell word: the argument in single quotes (any byte but NUL survives). */
const shellWord = (arg: string) => `'${arg.replace(/'/g, `'\\''`)}'`;

/**
 * The CLI on a pseudo-terminal (util-linux `script`): stdout and stderr are a
 * TTY, as in a person's shell. Resolves with every byte the terminal was sent
 * (the terminal's own newline translation included: "\n" arrives as "\r\n").
 */
export function runCliInTerminal(url: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; bytes: Buffer }> {
  const command = [process.execPath, TSX, `${PROJECT_ROOT}client/cli.ts`, ...args].map(shellWord).join(' ');
  const child = spawn('script', ['--quiet', '--return', '--command', command, '/dev/null'], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, FORKLINE_URL: url, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (c: Buffer) => chunks.push(c));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, bytes: Buffer.concat(chunks) })));
}
