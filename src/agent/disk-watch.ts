// What a command (a shell command, or a workspace MCP server for as long as its
// process lives) holds of the disk while it runs, held to its workspace's quota (docs/files.md "Limits"). The quota is checked when the command is
// over (file-workspace.ts capture); until then a command could fill the disk,
// which Postgres may share (a loop of `fallocate -l 10M` held 2 GB within
// seconds, and nothing bounded it but the tool timeout), or its inodes (100,000
// empty files). One statfs every WATCH_MS says how much the file system grew;
// only when it grew by more than the quota leaves room for is the workspace
// itself measured (by `du`, in a process of its own: a walk of a wide tree
// never holds the event loop), and the command stopped when the workspace
// holds more than the quota.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';
import type { WorkspaceLimits } from '../core/file-tree.ts';

/**
 * `argv` run by /bin/sh where no file it writes grows past `maxFileBytes`, the cap a
 * capture refuses a file over anyway, held while it runs (RLIMIT_FSIZE): without it a
 * `fallocate -l 20G` took 20 GB of the disk at once, and the disk is Postgres's too.
 * POSIX `ulimit -f` counts 512-byte blocks and sets the hard limit too: what runs
 * cannot raise it. A shell command and a workspace MCP server are both run so.
 */
export function fileSizeCapped(argv: readonly string[], maxFileBytes: number): string[] {
  return ['/bin/sh', '-c', `ulimit -f ${Math.ceil(maxFileBytes / 512)} && exec "$0" "$@"`, ...argv];
}

/** How often the file system is looked at: a command is stopped within about this of passing the quota (plus a measure). */
const WATCH_MS = 200;
/** What one file or directory may take of the disk besides its bytes (a block): the tree of many small files the quota allows holds more than its bytes. */
const BLOCK_BYTES = 4096;
/**
 * A file system that shrank (others freed more than this one wrote: a test's database removed, Postgres recycling its
 * WAL) hides what was written meanwhile from the statfs: the workspace is measured then too, at most this often.
 */
const RESYNC_MS = 1000;
/** The longest a measure of the workspace may take (a tree as wide as the quota allows takes well under this). */
const MEASURE_TIMEOUT_MS = 10_000;

/** Bytes of the disk, and inodes: what a file system has in use, or what a tree holds of it. */
interface Held {
  bytes: number;
  inodes: number;
}

/** What the file system holding `dir` has in use. */
async function inUse(dir: string): Promise<Held> {
  const s = await fs.statfs(dir);
  return { bytes: (s.blocks - s.bfree) * s.bsize, inodes: s.files - s.ffree };
}

/**
 * What `du` counts of the tree at `dir` with `flags`: following no symlink, on
 * its own file system. `du` says how far it got when a file vanished under it
 * (exit 1): that sum counts.
 */
function du(dir: string, flags: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile('du', [...flags, '-sx', dir], { timeout: MEASURE_TIMEOUT_MS, env: { LC_ALL: 'C' } }, (err, stdout) => {
      const n = Number(stdout.split('\t')[0]);
      if (stdout && Number.isFinite(n)) resolve(n);
      else reject(err ?? new Error(`du said ${JSON.stringify(stdout.slice(0, 100))}`));
    });
  });
}

/** What the tree at `dir` holds: its allocated blocks (a sparse file counts what it holds) and its inodes (each hard-linked file once). */
async function heldBy(dir: string): Promise<Held> {
  return { bytes: (await du(dir, ['-k'])) * 1024, inodes: await du(dir, ['--inodes']) };
}

/** Says when a watched process came to hold what it holds, in the words of `over`'s why ("while it ran"). */
export type WatchedWhen = () => string;

/**
 * Watches a workspace `dir` while a process works in it, held to the
 * workspace's quota (`files.limits`) from what its files held when last
 * accepted (`files.diskBytes`): the one start of a watch for the shell's
 * commands and workspace MCP servers alike (a server listing its tools: an
 * empty directory of its own under the same limits).
 */
export function watchWorkspace(
  files: { readonly limits: WorkspaceLimits; readonly diskBytes: number },
  dir: string,
  over: (why: string) => void,
  when?: WatchedWhen,
): Promise<() => void> {
  const { maxBytes, maxFiles } = files.limits;
  return watchDisk(dir, { maxBytes, maxFiles, heldBefore: files.diskBytes, when }, over);
}

/**
 * Watches the directory `dir` while a process runs in it: calls `over` (once,
 * with why) when it holds more of the disk than its quota allows (`maxBytes`
 * and a block for each of `maxFiles`; `maxFiles` inodes besides itself).
 * `heldBefore` is what its files held when the watch started; `when` says when
 * it came to hold that ("while it ran" unless it says otherwise). The caller
 * calls the answer to stop watching. What watching costs: one statfs every
 * WATCH_MS, and a `du` only when the file system grew by more than the room
 * the quota leaves (by whoever wrote), or shrank (at most every RESYNC_MS).
 */
async function watchDisk(
  dir: string,
  opts: { maxBytes: number; maxFiles: number; heldBefore: number; when?: WatchedWhen },
  over: (why: string) => void,
): Promise<() => void> {
  const when = opts.when ?? (() => 'while it ran');
  const bound: Held = { bytes: opts.maxBytes + opts.maxFiles * BLOCK_BYTES, inodes: opts.maxFiles + 1 };
  let baseline = await inUse(dir);
  let room: Held = { bytes: bound.bytes - opts.heldBefore, inodes: bound.inodes };
  let looking = false;
  let done = false;
  let measuredAt = 0;
  const look = async () => {
    const now = await inUse(dir);
    const grew = now.bytes - baseline.bytes > room.bytes || now.inodes - baseline.inodes > room.inodes;
    // Before, a server writing 300 MiB between calls while another process freed more went unseen to the end.
    const shrank = (now.bytes < baseline.bytes || now.inodes < baseline.inodes) && Date.now() - measuredAt >= RESYNC_MS;
    if (!grew && !shrank) return;
    measuredAt = Date.now();
    const held = await heldBy(dir);
    if (done) return;
    if (held.bytes > bound.bytes || held.inodes > bound.inodes) {
      done = true;
      over(
        held.bytes > bound.bytes
          ? `it came to hold ${held.bytes} bytes of the disk ${when()}, past what the workspace quota allows (${opts.maxBytes} bytes, and a block for each of ${opts.maxFiles} files and directories)`
          : `it came to hold ${held.inodes - 1} files and directories ${when()}, past the workspace quota of ${opts.maxFiles}`,
      );
      return;
    }
    // Others wrote to (or freed) the same disk meanwhile: from here, the room the quota leaves.
    baseline = now;
    room = { bytes: bound.bytes - held.bytes, inodes: bound.inodes - held.inodes };
  };
  const timer = setInterval(() => {
    if (looking || done) return;
    looking = true;
    look()
      .catch(() => {}) // a look that failed (the directory removed under it) is tried again at the next tick
      .finally(() => (looking = false));
  }, WATCH_MS);
  return () => {
    done = true;
    clearInterval(timer);
  };
}
