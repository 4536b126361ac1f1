// A session's file workspace as the log records it (docs/contract.md#agent-loop),
// pure: paths, change sets, the tree as of a seq, and the difference of two
// trees. File contents live in the store by sha-256 (store/file-blobs.ts);
// here a file is its path, size and hash.

/** The event a call's change set is stored as, right before its `tool/result`, in the same append. */
export const FILES_CHANGE = 'plugin/files/change';

/** One path a call changed: its new content's hash and size, or `hash: null` when it was deleted. */
export interface FileChangeRecord {
  path: string;
  hash: string | null;
  size: number;
}

/** The data of a `plugin/files/change` event. */
export interface FilesChangeData {
  callId: string;
  changes: FileChangeRecord[];
}

/** A file of a tree: where it is, what it holds, and the seq of the change set that last wrote it. */
export interface FileEntry {
  path: string;
  size: number;
  hash: string;
  seq: number;
}

/** A tree: path → entry. */
export type FileTree = Map<string, FileEntry>;

export const MAX_PATH_LENGTH = 1024;

/**
 * The canonical form of a workspace path ("a/b.txt": relative, `/`-separated,
 * no `.`/`..`/empty segments), or why it is not one. A leading "./" and
 * repeated slashes are forgiven; "." and "" name the workspace itself (`''`).
 * Where the file lives on disk is the agent's business; this only keeps a
 * path from leaving the workspace by its spelling (symlinks are checked on disk).
 */
export function workspacePath(raw: string): { path: string } | { problem: string } {
  if (raw.length > MAX_PATH_LENGTH) return { problem: `a path is at most ${MAX_PATH_LENGTH} characters` };
  if (raw.includes('\0')) return { problem: 'a path cannot contain NUL' };
  if (raw.includes('\\')) return { problem: 'use "/" to separate path segments' };
  if (raw.startsWith('/')) return { problem: `"${raw}" is absolute: paths are relative to the workspace` };
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.some((s) => s === '..')) return { problem: `"${raw}" leaves the workspace ("..")` };
  return { path: segments.join('/') };
}

/**
 * Folds change sets, oldest first, into the tree they leave. The caller passes
 * only change sets in effect (each one's result recorded, at or before the cut:
 * store/session-log.ts `fileChangeSets`).
 */
export function foldFileTree(changeSets: Iterable<{ seq: number; data: FilesChangeData }>, tree: FileTree = new Map()): FileTree {
  for (const { seq, data } of changeSets) {
    for (const c of data.changes) {
      if (c.hash === null) tree.delete(c.path);
      else tree.set(c.path, { path: c.path, size: c.size, hash: c.hash, seq });
    }
  }
  return tree;
}

/** The entries of a tree under `dir` ('' : all), in path order. */
export function listTree(tree: FileTree, dir = ''): FileEntry[] {
  const prefix = dir ? `${dir}/` : '';
  return [...tree.values()].filter((e) => !prefix || e.path.startsWith(prefix) || e.path === dir).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

export type FileChangeKind = 'ADDED' | 'CHANGED' | 'DELETED';

export interface TreeChange {
  path: string;
  kind: FileChangeKind;
  before?: FileEntry;
  after?: FileEntry;
}

/** What differs between two trees, per path in path order (same hash: unchanged). */
export function treeChanges(before: FileTree, after: FileTree): TreeChange[] {
  const out: TreeChange[] = [];
  for (const [path, a] of after) {
    const b = before.get(path);
    if (!b) out.push({ path, kind: 'ADDED', after: a });
    else if (b.hash !== a.hash) out.push({ path, kind: 'CHANGED', before: b, after: a });
  }
  for (const [path, b] of before) if (!after.has(path)) out.push({ path, kind: 'DELETED', before: b });
  return out.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
}

/** Bytes and files a tree holds (the workspace quota counts these). */
export function treeUsage(tree: Iterable<{ size: number }>): { bytes: number; files: number } {
  let bytes = 0;
  let files = 0;
  for (const e of tree) {
    bytes += e.size;
    files++;
  }
  return { bytes, files };
}

/** The text of a file's bytes when they are UTF-8 without NUL (what a diff or `text` shows), else undefined. */
export function textOf(bytes: Uint8Array): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
