// Acting inside a session's workspace directory without trusting its names
// between a check and the act (docs/operations.md "Threat model", Files and
// workspaces). What a command left there, or a process it detached, may
// replace any directory with a symlink and any file with a FIFO at any time;
// so a directory is opened one segment at a time without following symlinks,
// and what lies in it is reached through that open handle
// (`/proc/self/fd/<fd>/<name>`, the *at system calls of Linux), never through
// a path that is resolved again. A file is opened without following a symlink
// and without blocking (a FIFO answers at once), and is read only once its
// handle shows a regular file inside the workspace.
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import { promisify } from 'node:util';
import { ToolError } from './tool-error.ts';

const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants;

/** `name` in the directory `dir` holds open: resolved through the handle, whatever its path names now. */
export const inDirectory = (dir: FileHandle, name: string) => `/proc/self/fd/${dir.fd}/${name}`;

const codeOf = (err: unknown) => (err as { code?: string }).code ?? '';

/** Opens a directory itself, not a symlink in its place. */
export async function openDirectory(abs: string): Promise<FileHandle> {
  return fs.open(abs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
}

/** The directory `name` in `dir`, opened without following a symlink; undefined when it is gone or not a directory (a symlink, a file). */
export async function openSubdirectory(dir: FileHandle, name: string): Promise<FileHandle | undefined> {
  return fs
    .open(inDirectory(dir, name), O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
    .catch((err) => (['ENOENT', 'ENOTDIR', 'ELOOP'].includes(codeOf(err)) ? undefined : Promise.reject(err)));
}

/**
 * The directory `rel` ('': the root itself) below `root`, opened segment by
 * segment without following a symlink, made as needed when `create`; a
 * ToolError when a segment is a symlink or a file. The caller closes it.
 */
export async function openDirectoryBelow(root: FileHandle, rel: string, create: boolean): Promise<FileHandle> {
  let at = await fs.open(inDirectory(root, '.'), O_RDONLY | O_DIRECTORY);
  for (const segment of rel ? rel.split('/') : []) {
    let next: FileHandle | undefined;
    try {
      if (create) await fs.mkdir(inDirectory(at, segment)).catch((err) => (codeOf(err) === 'EEXIST' ? undefined : Promise.reject(err)));
      next = await openSubdirectory(at, segment);
    } finally {
      await at.close();
    }
    if (!next) throw new ToolError(`"${rel}" is not a directory of the workspace (a symlink or a file is in its place, or nothing)`);
    at = next;
  }
  return at;
}

/**
 * Opens a workspace file to read it: a symlink is refused (not followed), a
 * FIFO or device answers at once and is refused, and the file the handle holds
 * must lie under `rootReal` (a directory on its way replaced by a symlink
 * since it was checked leads elsewhere). `undefined`: no file there (any more).
 */
export async function openFileInside(abs: string, rootReal: string, rel: string): Promise<{ handle: FileHandle; size: number } | undefined> {
  let handle: FileHandle;
  try {
    handle = await fs.open(abs, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    if (['ENOENT', 'ENOTDIR'].includes(codeOf(err))) return undefined;
    if (codeOf(err) === 'ELOOP') throw new ToolError(`"${rel}" is a symlink, not a file`);
    throw err;
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) throw new ToolError(`"${rel}" is not a regular file`);
    const real = await fs.readlink(`/proc/self/fd/${handle.fd}`);
    if (!real.startsWith(rootReal + '/')) throw new ToolError(`"${rel}" leads outside the workspace`);
    return { handle, size: st.size };
  } catch (err) {
    await handle.close();
    throw err;
  }
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
 * never followed.
 */
export async function removeDirectory(abs: string): Promise<void> {
  await run('rm', ['-rf', '--one-file-system', '--', abs], { maxBuffer: 1024 * 1024 });
}
