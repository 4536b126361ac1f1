// What a command holds of the disk while it runs, held to its workspace's
// quota (docs/files.md "Limits"). The quota is checked when the command is
// over (file-workspace.ts capture); until then a command could fill the disk,
// which Postgres may share (a loop of `fallocate -l 10M` held 2 GB within
// seconds, and nothing bounded it but the tool timeout). One statfs every
// WATCH_MS says how much the file system grew; only when it grew by more than
// the quota leaves room for is the workspace itself measured (by `du`, in a
// process of its own: a walk of a wide tree never holds the event loop), and
// the command stopped when the workspace holds more than the quota.
import { execFile } from 'node:child_process';
import fs from 'node:fs/promises';

/** How often the file system is looked at: a command is stopped within about this of passing the quota (plus a measure). */
const WATCH_MS = 200;
/** What one file or directory may take of the disk besides its bytes (a block): the tree of many small files the quota allows holds more than its bytes. */
const BLOCK_BYTES = 4096;
/** The longest a measure of the workspace may take (a tree as wide as the quota allows takes well under this). */
const MEASURE_TIMEOUT_MS = 10_000;

/** Bytes the file system holding `dir` has in use. */
async function usedBytes(dir: string): Promise<number> {
  const s = await fs.statfs(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

/**
 * Bytes of the disk the tree at `dir` takes (allocated blocks: a sparse file
 * counts what it holds), following no symlink, on its own file system.
 * `du` says how far it got when a file vanished under it (exit 1): that sum counts.
 */
function heldBytes(dir: string): Promise<number> {
  return new Promise((resolve, reject) => {
    execFile('du', ['-skx', dir], { timeout: MEASURE_TIMEOUT_MS, env: { LC_ALL: 'C' } }, (err, stdout) => {
      const kib = Number(stdout.split('\t')[0]);
      if (stdout && Number.isFinite(kib)) resolve(kib * 1024);
      else reject(err ?? new Error(`du said ${JSON.stringify(stdout.slice(0, 100))}`));
    });
  });
}

/**
 * Watches the workspace `dir` while a command runs in it: calls `over` (once,
 * with why) when it holds more of the disk than its quota allows (`maxBytes`,
 * and a block for each of `maxFiles`). `heldBefore` is what it held when the
 * command started. The caller calls the answer to stop watching.
 */
export async function watchDisk(
  dir: string,
  opts: { maxBytes: number; maxFiles: number; heldBefore: number },
  over: (why: string) => void,
): Promise<() => void> {
  const bound = opts.maxBytes + opts.maxFiles * BLOCK_BYTES;
  let baseline = await usedBytes(dir);
  let room = bound - opts.heldBefore;
  let looking = false;
  let done = false;
  const look = async () => {
    const used = await usedBytes(dir);
    if (used - baseline <= room) return;
    const held = await heldBytes(dir);
    if (done) return;
    if (held > bound) {
      done = true;
      over(
        `it came to hold ${held} bytes of the disk while it ran, past what the workspace quota allows (${opts.maxBytes} bytes, and a block for each of ${opts.maxFiles} files and directories)`,
      );
      return;
    }
    // Others wrote to the same disk meanwhile: from here, the room the quota leaves.
    baseline = used;
    room = bound - held;
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
