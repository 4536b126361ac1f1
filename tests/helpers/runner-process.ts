// An external runner (tests/fixtures/runners/*.ts) as a separate process
// serving a pool of the forkline server at `url`: what a team runs beside
// forkline. Its output is collected (the AI SDK runner prints each
// claim as {"claimed", "token"}); every process started is killed by stopRunners.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT } from './process.ts';

export interface RunnerProcess {
  child: ChildProcess;
  output(): string;
  /** The model's prompts as JSON lines (the AI SDK runner writes them). */
  promptLog: string;
}

const started: ChildProcess[] = [];

export function startRunnerProcess(
  url: string,
  opts: { name: string; dir: string; script?: 'ai-sdk-runner.ts' | 'agents-runner.ts'; env?: Record<string, string> },
): RunnerProcess {
  const promptLog = path.join(opts.dir, `${opts.name}.prompts.jsonl`);
  const script = opts.script ?? 'ai-sdk-runner.ts';
  const child = spawn(process.execPath, ['--import', `${PROJECT_ROOT}node_modules/tsx/dist/loader.mjs`, `${PROJECT_ROOT}tests/fixtures/runners/${script}`], {
    env: { ...process.env, FORKLINE_URL: url, POOL: 'ext', RUNNER_ID: opts.name, PROMPT_LOG: promptLog, ...opts.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  started.push(child);
  return { child, output: () => out, promptLog };
}

/** Stops a runner as its operator would (SIGTERM: it finishes and releases), waiting for it to exit. */
export async function stopRunner(r: RunnerProcess): Promise<void> {
  if (r.child.exitCode !== null || r.child.signalCode !== null) return;
  r.child.kill('SIGTERM');
  await new Promise((resolve) => r.child.once('exit', resolve));
}

/** Kills every runner process still running (afterAll). */
export function killRunners(): void {
  for (const c of started) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
}
