// The opt-in `shell` tool (FORKLINE_SHELL=on, docs/files.md): runs a
// command with /bin/sh in the session's file workspace as its working
// directory, with a time limit, bounded output and none of forkline's
// environment (no database URL, model keys or tokens). Where bubblewrap
// (`bwrap`) is installed the command runs in its sandbox: the file system
// read-only but for the workspace, a private /tmp, no network. Where it is
// not, the command runs as forkline's OS user, confined by nothing but its
// working directory — the README says so, and the process logs it at start.
// What the command did to the workspace's files is found by a walk of the
// tree (size and modification time; only what differs is hashed) and recorded
// with its result like any file tool's change set.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { tool, ToolError, type Tool } from './tool-definition.ts';

/** Each of stdout and stderr is cut at this many bytes. */
export const SHELL_OUTPUT_MAX_BYTES = 64 * 1024;

/** The bubblewrap binary on PATH, if any. */
export function findBubblewrap(pathVar = process.env.PATH ?? ''): string | undefined {
  for (const dir of pathVar.split(':').filter(Boolean)) {
    const candidate = path.join(dir, 'bwrap');
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

function commandLine(dir: string, command: string, bwrap: string | undefined): [string, string[]] {
  if (!bwrap) return ['/bin/sh', ['-c', command]];
  return [
    bwrap,
    ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp', '--bind', dir, dir, '--chdir', dir,
     '--unshare-all', '--die-with-parent', '--new-session', '/bin/sh', '-c', command],
  ];
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
    text() {
      const t = Buffer.concat(chunks).toString('utf8');
      return dropped ? `${t}\n[… ${dropped} more bytes]` : t;
    },
  };
}

export function shellTool(opts: { bwrap?: string } = {}): Tool {
  return tool({
    name: 'shell',
    description:
      "Runs a command with /bin/sh in the session's file workspace (its working directory) and answers its exit code and output. " +
      'Files it changes in the workspace are kept with the session; anything it does elsewhere is not.',
    args: z.strictObject({ command: z.string().min(1).max(10_000) }),
    effect: 'side-effects',
    files: 'also',
    run: async ({ command }, ctx) => {
      if (!ctx.files) throw new ToolError('this process has no file workspaces');
      const dir = await ctx.files.ready();
      const [file, args] = commandLine(dir, command, opts.bwrap);
      const stdout = bounded();
      const stderr = bounded();
      const child = spawn(file, args, {
        cwd: dir,
        // Nothing of forkline's environment: a command sees none of its secrets.
        env: { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: dir, LANG: 'C.UTF-8', TERM: 'dumb' },
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
          child.on('close', (c, signal) => resolve(c ?? `killed by ${signal}`));
        });
        if (ctx.signal.aborted) throw ctx.signal.reason;
        const out = [`exit code ${code}`];
        const o = stdout.text();
        const e = stderr.text();
        if (o) out.push(`--- stdout ---\n${o}`);
        if (e) out.push(`--- stderr ---\n${e}`);
        return out.join('\n');
      } finally {
        ctx.signal.removeEventListener('abort', kill);
      }
    },
  });
}
