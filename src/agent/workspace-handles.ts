// Acting inside a session's workspace directory without trusting its names
// between a check and the act (docs/operations.md "Threat model", Files and
// workspaces). What a command left there, or a process it detached, may
// replace any directory with a symlink and any file with a FIFO at any time;
// so a directory is opened one segment at a time without following symlinks,
// and what lies in it is reached through that open handle
// (`/proc/self/fd/<fd>/<name>`, the *at system calls of Linux), never through
// a path that is resolved again. A file is found without being opened (O_PATH)
// and read only once its handle shows a regular file inside the workspace;
// a symlink is read as text and followed only while it stays inside, so
// nothing outside the workspace is ever looked up (findBelow).
import { execFile } from 'node:child_process';
import { constants, type BigIntStats, type Stats } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import { promisify } from 'node:util';
import { MAX_PATH_LENGTH } from '../core/file-tree.ts';
import { ToolError } from './tool-error.ts';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;
/**
 * Linux's O_PATH (Node does not export it): a handle naming an inode without
 * opening it, so no FIFO blocks and no device driver's open runs before the
 * handle shows what it is. Read only after fstat said "regular file", by
 * reopening that same inode through /proc/self/fd.
 */
const O_PATH = 0o10000000;
/** Symlinks one path may pass through, as Linux allows (ELOOP past it). */
const MAX_SYMLINK_HOPS = 40;
/** Directories one path of a tree can pass through (one-letter names). */
const MAX_DEPTH = MAX_PATH_LENGTH / 2;

/** `name` in the directory `dir` holds open: resolved through the handle, whatever its path names now. */
export const inDirectory = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

const codeOf = (err: unknown) => (err as { code?: string }).code ?? '';
const isMissing = (err: unknown) => ['ENOENT', 'ENOTDIR'].includes(codeOf(err));

/** A workspace directory held open, with the absolute spellings a symlink in it may name it by. */
export interface WorkspaceRoot {
  handle: FileHandle;
  /** Its real path: a handle's own path must lie under it. */
  real: string;
  /** The path forkline made it at (where the shell's sandbox mounts it) and its real path. */
  spellings: readonly string[];
}

/** Opens a workspace directory itself, not a symlink in its place. The caller closes `handle`. */
export async function openWorkspaceRoot(dir: string, real: string): Promise<WorkspaceRoot> {
  return { handle: await openDirectory(dir), real, spellings: [...new Set([dir, real])] };
}

/** Opens a directory itself, not a symlink in its place. */
async function openDirectory(abs: string): Promise<FileHandle> {
  return fs.open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
}

/** The directory `name` in `dir`, opened without following a symlink; undefined when it is gone or not a directory (a symlink, a file). */
export async function openSubdirectory(dir: FileHandle, name: string): Promise<FileHandle | undefined> {
  return fs
    .open(inDirectory(dir, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    .catch((err) => (['ENOENT', 'ENOTDIR', 'ELOOP'].includes(codeOf(err)) ? undefined : Promise.reject(err)));
}

/**
 * Where the symlink target `target`, met `depth` directories below the
 * workspace, leads, read as text only (nothing it names is looked up):
 * 'outside' when it leaves the workspace, else 'inside'.
 */
function symlinkLeads(target: string, depth: number, spellings: readonly string[]): 'inside' | 'outside' {
  if (target.startsWith('/')) {
    const spelling = spellings.find((s) => target === s || target.startsWith(s + '/'));
    if (spelling === undefined) return 'outside';
    target = target.slice(spelling.length);
    depth = 0;
  }
  for (const segment of target.split('/')) {
    if (segment === '..') depth--;
    else if (segment !== '' && segment !== '.') depth++;
    if (depth < 0) return 'outside';
  }
  return 'inside';
}

/**
 * The directory `segment` in `at` (met `depth` directories below the
 * workspace), made when `create` and opened without following a symlink; a
 * ToolError naming `shown` when a symlink (saying whether it leads out) or a
 * file is in its place. `at` stays open.
 */
async function openSegment(
  root: WorkspaceRoot,
  at: FileHandle,
  segment: string,
  depth: number,
  create: boolean,
  rel: string,
  shown: string,
): Promise<FileHandle> {
  if (create) await fs.mkdir(inDirectory(at, segment)).catch((err) => (codeOf(err) === 'EEXIST' ? undefined : Promise.reject(err)));
  const next = await openSubdirectory(at, segment);
  if (next) return next;
  const target = await fs.readlink(inDirectory(at, segment)).catch(() => undefined);
  if (target !== undefined && symlinkLeads(target, depth, root.spellings) === 'outside') throw new ToolError(`"${shown}" leads outside the workspace`);
  throw new ToolError(`"${rel}" is not a directory of the workspace (a symlink or a file is in its place, or nothing)`);
}

/**
 * The directory `rel` ('': the root itself) below `root`, opened segment by
 * segment without following a symlink, made as needed when `create`; a
 * ToolError when a segment is a symlink (saying whether it leads out) or a
 * file. The caller closes it.
 */
export async function openDirectoryBelow(root: WorkspaceRoot, rel: string, create: boolean, shown = rel): Promise<FileHandle> {
  let at = await fs.open(inDirectory(root.handle, '.'), O_RDONLY | O_DIRECTORY);
  const segments = rel ? rel.split('/') : [];
  for (const [depth, segment] of segments.entries()) {
    try {
      const next = await openSegment(root, at, segment, depth, create, rel, shown);
      await at.close();
      at = next;
    } catch (err) {
      await at.close();
      throw err;
    }
  }
  return at;
}

/** Workspace paths in path order: everything below a directory comes together (the paths that start with its name and "/"). */
export const byPath = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * Directories below a workspace root, each made as needed and opened as
 * openDirectoryBelow does, walked in path order with the chain above the
 * last one held open, across calls too: given in path order, each directory
 * on the way is opened once, where a walk from the root per path cost its
 * depth each time (9,750 files 500 directories deep: 5 million opens). The
 * caller closes the handles `open` gives, and the walk.
 */
export class TreeDirectories {
  /** The chain of directories open now, from the root down. */
  private readonly chain: Array<{ rel: string; handle: FileHandle }> = [];

  constructor(private readonly root: WorkspaceRoot) {}

  /** A handle on each of `rels` (workspace directories, '' the root). */
  async open(rels: Iterable<string>): Promise<Map<string, FileHandle>> {
    const out = new Map<string, FileHandle>();
    const chain = this.chain;
    try {
      // By `rel/`: a directory comes right before what lies below it ("a/", "a/b/"), not apart from it ("a", "a-b", "a/b").
      for (const rel of [...new Set(rels)]
        .map((r) => `${r}/`)
        .sort(byPath)
        .map((r) => r.slice(0, -1))) {
        while (chain.length && !rel.startsWith(chain.at(-1)!.rel + '/') && rel !== chain.at(-1)!.rel) await chain.pop()!.handle.close();
        const above = chain.at(-1)?.rel;
        const rest = rel === '' || rel === above ? [] : (above === undefined ? rel : rel.slice(above.length + 1)).split('/');
        for (const segment of rest) {
          const at = chain.at(-1);
          const here = at ? `${at.rel}/${segment}` : segment;
          chain.push({ rel: here, handle: await openSegment(this.root, at?.handle ?? this.root.handle, segment, chain.length, true, rel, rel) });
        }
        out.set(rel, await fs.open(inDirectory(chain.at(-1)?.handle ?? this.root.handle, '.'), O_RDONLY | O_DIRECTORY));
      }
      return out;
    } catch (err) {
      await Promise.all([...out.values()].map((h) => h.close()));
      throw err;
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.chain.splice(0).map((d) => d.handle.close()));
  }
}

/** What `findBelow` found: a handle on it (O_PATH: not opened for reading), what it is, and its workspace path. */
export interface Found {
  handle: FileHandle;
  stat: Stats;
  /** Where it is, once the symlinks on the way are followed. */
  rel: string;
}

/**
 * Finds the workspace path `rel` below `root` as openat2's RESOLVE_IN_ROOT
 * would: one name at a time, each looked up through its directory's handle
 * without following it. A symlink met is read (never followed by the
 * kernel) and, when `follow`, its target taken in its place, `..` leaving
 * only directories this walk opened: one that leaves the workspace, by an
 * absolute path or by `..`, is refused without anything it names being
 * looked up (no lstat, no open: outside the workspace nothing is touched, so
 * nothing is learnt of it either). Without `follow`, any symlink is refused.
 * Nothing is opened but as O_PATH: a FIFO or device node is found, not
 * opened. `undefined`: nothing there. The caller closes `handle`.
 */
export async function findBelow(root: WorkspaceRoot, rel: string, shown: string, follow: boolean): Promise<Found | undefined> {
  const names: string[] = [];
  const dirs: FileHandle[] = [];
  const current = () => dirs.at(-1) ?? root.handle;
  const pending = rel ? rel.split('/') : [];
  const outside = () => new ToolError(`"${shown}" leads outside the workspace`);
  let hops = 0;
  try {
    while (pending.length) {
      const segment = pending.shift()!;
      if (segment === '' || segment === '.') continue;
      if (segment === '..') {
        if (!dirs.length) throw outside();
        names.pop();
        await dirs.pop()!.close();
        continue;
      }
      const handle = await fs.open(inDirectory(current(), segment), O_PATH | O_NOFOLLOW).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
      if (!handle) return undefined;
      let stat: Stats;
      try {
        stat = await handle.stat();
      } catch (err) {
        await handle.close();
        throw err;
      }
      if (stat.isSymbolicLink()) {
        await handle.close();
        const target = await fs
          .readlink(inDirectory(current(), segment))
          .catch((err) => (codeOf(err) === 'EINVAL' || isMissing(err) ? undefined : Promise.reject(err)));
        if (++hops > MAX_SYMLINK_HOPS) throw new ToolError(`"${shown}" leads through a symlink loop`);
        // Replaced since it was found: found again (the hops bound how often).
        if (target === undefined) pending.unshift(segment);
        else if (!follow)
          throw symlinkLeads(target, dirs.length, root.spellings) === 'outside' ? outside() : new ToolError(`"${shown}" is a symlink, or leads through one`);
        else if (target.startsWith('/')) {
          // Inside only by the workspace's own absolute path: then taken from the root's handle, not from that path.
          const spelling = root.spellings.find((s) => target === s || target.startsWith(s + '/'));
          if (spelling === undefined) throw outside();
          while (dirs.length) await dirs.pop()!.close();
          names.length = 0;
          pending.unshift(...target.slice(spelling.length).split('/'));
        } else pending.unshift(...target.split('/')); // its `..` leave only directories this walk opened
        continue;
      }
      if (stat.isDirectory()) {
        // Held open while the walk goes on: a chain no path of a tree can name would take a handle per level.
        if (dirs.length >= MAX_DEPTH) {
          await handle.close();
          throw new ToolError(`"${shown}" leads deeper than a path may be (${MAX_PATH_LENGTH} characters)`);
        }
        dirs.push(handle);
        names.push(segment);
        continue;
      }
      if (pending.length) {
        await handle.close(); // a file where a directory was named
        return undefined;
      }
      return await checkedInside(root, { handle, stat, rel: [...names, segment].join('/') }, shown);
    }
    const handle = dirs.pop() ?? (await fs.open(inDirectory(root.handle, '.'), O_PATH | O_DIRECTORY));
    return await checkedInside(root, { handle, stat: await handle.stat(), rel: names.join('/') }, shown);
  } finally {
    await Promise.all(dirs.map((d) => d.close()));
  }
}

/**
 * What a handle holds must still lie in the workspace: its own path, as the
 * kernel knows it now (a directory moved out of the workspace meanwhile, by
 * a process running unsandboxed, would lead elsewhere). Closes it if not.
 */
async function checkedInside(root: WorkspaceRoot, found: Found, shown: string): Promise<Found> {
  const real = await fs.readlink(`/proc/self/fd/${found.handle.fd}`).catch(() => '');
  if (real === root.real || real.startsWith(root.real + '/')) return found;
  await found.handle.close();
  throw new ToolError(`"${shown}" leads outside the workspace`);
}

/**
 * A handle to read what `found` holds: only a regular file, reopened by its
 * handle (the same inode, whatever its name holds now), without blocking.
 */
export async function openToRead(found: Found, shown: string): Promise<FileHandle> {
  if (!found.stat.isFile()) throw new ToolError(`"${shown}" is not a regular file`);
  return fs.open(`/proc/self/fd/${found.handle.fd}`, O_RDONLY | O_NONBLOCK);
}

/** What `name` in `dir` is (not following a symlink); undefined when nothing is there. */
export async function lstatIn(dir: FileHandle, name: string, opts: { bigint: true }): Promise<BigIntStats | undefined>;
export async function lstatIn(dir: FileHandle, name: string): Promise<Stats | undefined>;
export async function lstatIn(dir: FileHandle, name: string, opts?: { bigint: true }): Promise<Stats | BigIntStats | undefined> {
  return fs.lstat(inDirectory(dir, name), opts).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
}

/** Creates `name` in `dir`, a new file (nothing may be in its place, a symlink least of all), to write. */
export async function createFileIn(dir: FileHandle, name: string): Promise<FileHandle> {
  return fs.open(inDirectory(dir, name), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644);
}

const run = promisify(execFile);

/**
 * Removes a directory and everything in it, however deep, wide or oddly named
 * (a command may leave a 10,000-deep chain, a million names, names that are
 * not UTF-8): GNU rm works through directory handles, where Node's fs.rm
 * fails past PATH_MAX and reads each directory whole. Symlinks are removed,
 * never followed. Whatever modes a command left: a directory its owner may
 * not read or write (chmod 000, 500) kept rm out, so the workspace was never
 * made again and outlived its session; when rm fails, the tree is given back
 * to its owner (u+rwX, chmod -R follows no symlink below `abs`) and removed again.
 */
export async function removeDirectory(abs: string): Promise<void> {
  const rm = () => run('rm', ['-rf', '--one-file-system', '--', abs], { maxBuffer: 1024 * 1024 });
  try {
    await rm();
  } catch {
    await run('chmod', ['-R', 'u+rwX', '--', abs], { maxBuffer: 1024 * 1024 }).catch(() => {}); // what it could not change, rm says
    await rm();
  }
}
