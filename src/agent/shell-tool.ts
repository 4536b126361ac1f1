// The opt-in `shell` tool (FORKLINE_SHELL, docs/files.md): runs a command
// with /bin/sh in the session's file workspace as its working directory, with
// a time limit, bounded output and an environment made from an allow-list
// (workspace-sandbox.ts: no database URL, model keys or tokens). With
// FORKLINE_SHELL=on the command runs in a bubblewrap sandbox that mounts the
// session's own directory and the system's programs, nothing else; where no
// sandbox can be made every call is refused. Only FORKLINE_SHELL=unsandboxed
// runs commands as forkline's OS user with nothing around them
// (docs/operations.md "Threat model" says what that gives away).
// What the command did to the workspace's files is found by a walk of the
// tree (size and modification time; only what differs is hashed) and recorded
// with its result like any file tool's change set.
import { spawn } from 'node:child_process';
import { z } from 'zod';
import { visibleOutput } from '../core/visible-text.ts';
import { tool, ToolError, type Tool } from './tool-definition.ts';
import { fileSizeCapped, watchWorkspace } from './disk-watch.ts';
import { sandboxArgs, workspaceEnvironment } from './workspace-sandbox.ts';

/** Each of stdout and stderr is cut at this many bytes (the rest is read and dropped, counted). */
export const SHELL_OUTPUT_MAX_BYTES = 64 * 1024;
/**
 * Once the command has exited, what it left running is killed and its output no longer
 * waited for past this (a process that left the group may still hold the pipes).
 */
const PIPES_GRACE_MS = 200;

/** How commands run: in bubblewrap, refused (no sandbox could be made, and why), or unsandboxed by the operator's choice. */
export type ShellRunner = { bwrap: string; tmpBytes?: number } | { refused: string } | { unsandboxed: true };

/** `command` run by /bin/sh, each file it writes held to the per-file cap (disk-watch.ts), in the sandbox unless unsandboxed. */
function commandLine(dir: string, command: string, runner: ShellRunner, maxFileBytes: number): [string, string[]] {
  const argv = fileSizeCapped(['/bin/sh', '-c', command], maxFileBytes);
  if ('bwrap' in runner) return [runner.bwrap, sandboxArgs(dir, argv, { tmpBytes: runner.tmpBytes })];
  return [argv[0]!, argv.slice(1)];
}

/** Collects a stream up to a byte limit, counting what it dropped. */
function bounded() {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = 0;
  return {
    push(b: Buffer) {
      const room = SHELL_OUTPUT_MAX_BYTES - kept;
      if (room > 0) chunks.push(b.subarray(0, room));
      kept += Math.min(room, b.byteLength);
      dropped += Math.max(0, b.byteLength - room);
    },
    /**
     * What the log keeps: invalid UTF-8 as U+FFFD, escape sequences dropped, other controls
     * but newlines and tabs shown as escapes (core/visible-text.ts), a cut said so.
     */
    text() {
      const t = visibleOutput(Buffer.concat(chunks).toString('utf8'));
      return dropped ? `${t}\n[cut: ${dropped} more bytes were not kept]` : t;
    },
  };
}

/** The shell's tool name (FORKLINE_APPROVAL_TOOLS may list it whether or not FORKLINE_SHELL offers it). */
export const SHELL_TOOL_NAME = 'shell';

export function shellTool(runner: ShellRunner): Tool {
  return tool({
    name: SHELL_TOOL_NAME,
    description:
      "Runs a command with /bin/sh in the session's file workspace (its working directory) and answers its exit code and output. " +
      'Files it changes in the workspace are kept with the session; anything it does elsewhere is not.',
    args: z.strictObject({ command: z.string().min(1).max(10_000) }),
    effect: 'side-effects',
    files: 'also',
    run: async ({ command }, ctx) => {
      if (!ctx.files) throw new ToolError('this process has no file workspaces');
      if ('refused' in runner) {
        throw new ToolError(
          `the shell is switched off on this server: ${runner.refused}, and commands run only in a sandbox (the operator may install bubblewrap, or set FORKLINE_SHELL=unsandboxed)`,
        );
      }
      const dir = await ctx.files.ready();
      const [file, args] = commandLine(dir, command, runner, ctx.files.limits.maxFileBytes);
      const stdout = bounded();
      const stderr = bounded();
      // What it holds of the disk is held to the quota while it runs, not only once it is over (disk-watch.ts).
      let overDisk: string | undefined;
      const unwatch = await watchWorkspace(ctx.files, dir, (why) => {
        overDisk = why;
        kill();
      });
      const child = spawn(file, args, {
        cwd: dir,
        // An allow-list, never forkline's environment (bwrap too gets only this:
        // it is the sandbox's PID 1, whose /proc/1/environ a command can read).
        env: workspaceEnvironment(dir),
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true, // its own process group: a timeout kills what it started too
      });
      child.stdout.on('data', (b: Buffer) => stdout.push(b));
      child.stderr.on('data', (b: Buffer) => stderr.push(b));
      const kill = () => {
        try {
          process.kill(-child.pid!, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      ctx.signal.addEventListener('abort', kill, { once: true });
      try {
        const code = await new Promise<number | string>((resolve, reject) => {
          child.on('error', reject);
          let code: number | string = 'unknown';
          child.on('exit', (c, signal) => {
            code = c ?? `killed by ${signal}`;
            // What it left running (a background job still writing) goes with it, and
            // pipes still held (by a process that left the group) are closed soon after.
            kill();
            setTimeout(() => {
              child.stdout.destroy();
              child.stderr.destroy();
            }, PIPES_GRACE_MS).unref();
          });
          child.on('close', () => resolve(code));
        });
        if (ctx.signal.aborted) throw ctx.signal.reason;
        const out = [overDisk ? `stopped: ${overDisk}` : `exit code ${code}`];
        const o = stdout.text();
        const e = stderr.text();
        if (o) out.push(`--- stdout ---\n${o}`);
        if (e) out.push(`--- stderr ---\n${e}`);
        if (overDisk) throw new ToolError(out.join('\n'));
        return out.join('\n');
      } finally {
        unwatch();
        ctx.signal.removeEventListener('abort', kill);
      }
    },
  });
}
