// What a process forkline starts in a session's workspace (the shell, a
// workspace MCP server) is given: an environment made from an allow-list,
// never forkline's own (no DATABASE_URL, model keys, API tokens), with HOME
// the workspace and git fenced out of any repository around it; and, for the
// shell (and an MCP server the operator marks `sandbox`), a bubblewrap sandbox
// that mounts the session's own directory and the system's programs, nothing
// else (docs/operations.md "Threat model").
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** `FORKLINE_SHELL`: off, on (sandboxed; refused without a sandbox), unsandboxed (the operator's explicit choice). */
export type ShellMode = 'off' | 'on' | 'unsandboxed';

/** Variables a workspace process may get from forkline's own environment (none of them carries a secret). */
const PASSED_THROUGH = ['LANG', 'LC_ALL', 'TZ'] as const;

/**
 * The environment of a process run in `dir`: PATH, HOME = the workspace
 * (or `home`), LANG, TERM, and GIT_CEILING_DIRECTORIES = the directory around it, so `git`
 * there finds no repository but one made inside the workspace; then `extra`
 * (what the operator's MCP config names in `env`).
 */
export function workspaceEnvironment(dir: string, opts: { path?: string; home?: string; extra?: Record<string, string> } = {}): Record<string, string> {
  const env: Record<string, string> = {
    PATH: opts.path ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: opts.home ?? dir,
    LANG: 'C.UTF-8',
    TERM: 'dumb',
    GIT_CEILING_DIRECTORIES: path.dirname(dir),
  };
  for (const key of PASSED_THROUGH) if (process.env[key]) env[key] = process.env[key]!;
  return { ...env, ...opts.extra };
}

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

/** Top-level system directories a command needs (programs, libraries); each a read-only bind, or a symlink where the system has one (merged /usr). */
const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
/** Of /etc, only what programs need to start and behave (no service's configuration). */
const ETC_ENTRIES = [
  'alternatives',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'ssl',
  'ca-certificates',
  'passwd',
  'group',
  'nsswitch.conf',
  'mime.types',
  'gitconfig',
];

function systemMounts(): string[] {
  const args: string[] = [];
  for (const dir of SYSTEM_DIRS) {
    let stat: fs.Stats;
    try {
      stat = fs.lstatSync(dir);
    } catch {
      continue;
    }
    if (stat.isSymbolicLink()) args.push('--symlink', fs.readlinkSync(dir), dir);
    else if (stat.isDirectory()) args.push('--ro-bind', dir, dir);
  }
  for (const entry of ETC_ENTRIES) args.push('--ro-bind-try', `/etc/${entry}`, `/etc/${entry}`);
  return args;
}

/** What a sandbox holds besides the system's programs and its working directory (an MCP server's `sandbox` in mcp-config.ts). */
export interface SandboxExtras {
  /** Directories (or files) mounted read-only at their own paths: a server's own code, for example. */
  readOnly?: readonly string[];
  /** Share the host's network (default: none, not even loopback, so no forkline port). */
  network?: boolean;
  /** What each of its /tmp and /dev/shm may hold (FORKLINE_SANDBOX_TMP_BYTES; default DEFAULT_SANDBOX_TMP_BYTES). */
  tmpBytes?: number;
}

/**
 * What each of a sandbox's /tmp and /dev/shm may hold by default (FORKLINE_SANDBOX_TMP_BYTES): a tmpfs
 * is memory, and unbounded it was half the machine's (a command's `fallocate -l 1G /tmp/f` held 1 GB of
 * RAM until it ended, as many times as commands ran at once).
 */
export const DEFAULT_SANDBOX_TMP_BYTES = 64 * 1024 * 1024;

/**
 * bwrap's arguments for `argv` run in `dir`: a new root of its own (empty
 * tmpfs, read-only once made) holding the system's programs read-only, a
 * private read-only /dev, /proc of a new PID namespace (no forkline process
 * in it), a private /tmp and /dev/shm of `tmpBytes` each (the only memory a
 * command can write to: docs/operations.md "Threat model"; no user namespace
 * can be made inside, so no mount of its own), and the
 * workspace at its own path — not its parent, so no other session's
 * directory; no network; killed with forkline. `extras` adds mounts the
 * operator named and, when asked, the network.
 */
export function sandboxArgs(dir: string, argv: string[], extras: SandboxExtras = {}): string[] {
  const tmpBytes = String(extras.tmpBytes ?? DEFAULT_SANDBOX_TMP_BYTES);
  return [
    ...systemMounts(),
    '--dev',
    '/dev',
    '--size',
    tmpBytes,
    '--tmpfs',
    '/dev/shm',
    '--remount-ro',
    '/dev',
    '--proc',
    '/proc',
    '--size',
    tmpBytes,
    '--tmpfs',
    '/tmp',
    ...(extras.readOnly ?? []).flatMap((p) => ['--ro-bind', p, p]),
    '--bind',
    dir,
    dir,
    // The root is a tmpfs too: writable, it was memory without a bound.
    '--remount-ro',
    '/',
    '--chdir',
    dir,
    '--unshare-all',
    // No user namespace of its own inside: in one, a command mounted a tmpfs of its own, of no bound (and each is more of the kernel to attack).
    '--unshare-user',
    '--disable-userns',
    ...(extras.network ? ['--share-net'] : []),
    '--unshare-pid',
    '--die-with-parent',
    '--new-session',
    ...argv,
  ];
}

/** How a process that must be sandboxed is run: in bubblewrap, or not at all (and why). */
export type SandboxRunner = { bwrap: string; tmpBytes?: number } | { refused: string };

/** The runner for sandboxed processes on this machine, decided by one probe (sandboxProblem). */
export function sandboxRunner(bwrap: string | undefined, tmpBytes?: number): SandboxRunner {
  const problem = sandboxProblem(bwrap);
  return problem ? { refused: problem } : { bwrap: bwrap!, tmpBytes };
}

/**
 * Whether `bwrap` can make the sandbox here (it needs user namespaces or
 * privileges a container may not give): one throwaway run at start-up.
 * Undefined when it can; else why not.
 */
export function sandboxProblem(bwrap: string | undefined): string | undefined {
  if (!bwrap) return 'bubblewrap (bwrap) is not on PATH';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-sandbox-probe-'));
  try {
    const r = spawnSync(bwrap, sandboxArgs(dir, ['/bin/sh', '-c', 'exit 0']), { env: workspaceEnvironment(dir), timeout: 10_000, encoding: 'utf8' });
    if (r.status === 0) return undefined;
    return `${bwrap} could not make a sandbox (${(r.error?.message ?? r.stderr.trim()) || `exit ${r.status ?? r.signal}`})`;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
