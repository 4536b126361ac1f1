// A session's file workspace as the log records it (docs/contract.md#agent-loop),
// pure: paths, change sets, the tree as of a seq, and the difference of two
// trees. File contents live in the store by sha-256 (store/file-blobs.ts);
// here a file is its path, size and hash.
import { z } from 'zod';

// The event a call's change set is stored as (named in event-types.ts, which the dashboard imports without zod).
import { FILES_CHANGE } from './event-types.ts';
export { FILES_CHANGE };

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
/** The longest name one segment may have, in UTF-8 bytes (a file system's NAME_MAX): a longer one can never be made on disk. */
export const MAX_SEGMENT_BYTES = 255;

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
  // An unpaired surrogate is written to disk as U+FFFD (node encodes names as UTF-8), so "a\uD800" and "a\uD801"
  // would be one file under two recorded names, and no change set naming either could be stored (docs/files.md "Paths").
  if (!raw.isWellFormed()) return { problem: 'a path cannot contain an unpaired surrogate (it is not Unicode text)' };
  if (raw.includes('\\')) return { problem: 'use "/" to separate path segments' };
  if (raw.startsWith('/')) return { problem: `"${raw}" is absolute: paths are relative to the workspace` };
  const segments = raw.split('/').filter((s) => s !== '' && s !== '.');
  if (segments.some((s) => s === '..')) return { problem: `"${raw}" leaves the workspace ("..")` };
  if (segments.some((s) => Buffer.byteLength(s) > MAX_SEGMENT_BYTES)) return { problem: `a name in a path is at most ${MAX_SEGMENT_BYTES} bytes` };
  return { path: segments.join('/') };
}

/**
 * Why `raw` cannot be a path a change set records, or undefined: the rule of
 * workspacePath, and a recorded path is already canonical (not the workspace
 * itself). Every door that writes a change set (the agent, recordings, a
 * runner's appendEvents) and every place a tree is made on disk holds paths
 * to this one rule.
 */
export function changeSetPathProblem(raw: string): string | undefined {
  const r = workspacePath(raw);
  if ('problem' in r) return r.problem;
  if (r.path === '') return `"${raw}" names the workspace itself, not a file`;
  if (r.path !== raw) return `"${raw}" is not in canonical form ("${r.path}")`;
  return undefined;
}

/** A content's name: its sha-256, lower-case hex. */
export const FILE_HASH = /^[0-9a-f]{64}$/;

/**
 * Why content is not what names it, or undefined: a content is its sha-256
 * and its size (docs/files.md "Where the files live"). Held at the doors that
 * store or name content (a recording's content lines, a change set's size) and
 * again wherever content is read back to be written or served (a restore,
 * Session.file, an export): a row that changed since, or a chunk list that
 * lost a chunk, is refused there, never written or served as that file.
 * `found.hash` is the sha-256 of the bytes, when they were read.
 */
export function contentProblem(named: { hash: string; size?: number; path?: string }, found: { hash?: string; size: number }): string | undefined {
  const what = named.path === undefined ? `file content ${named.hash}` : `the content of "${named.path}" (${named.hash})`;
  if (found.hash !== undefined && found.hash !== named.hash) return `${what} does not match its hash (its ${found.size} bytes hash to ${found.hash})`;
  if (named.size !== undefined && named.size !== found.size)
    return `says "${named.path ?? named.hash}" has ${named.size} bytes, but its content has ${found.size}`;
  return undefined;
}

/** The largest size a change set may claim (the store keeps sizes as int4). */
const MAX_RECORDED_SIZE = 2 ** 31 - 1;

/** `plugin/files/change` data, validated at every door (core/events.ts decodes it like a core event). */
export const filesChangeDataSchema = z.strictObject({
  callId: z.string().min(1).max(256),
  changes: z
    .array(
      z.strictObject({
        path: z.string().superRefine((p, ctx) => {
          const problem = changeSetPathProblem(p);
          if (problem) ctx.addIssue({ code: 'custom', message: `path ${JSON.stringify(p)} is refused: ${problem}` });
        }),
        hash: z.string().regex(FILE_HASH, 'a sha-256 in lower-case hex').nullable(),
        size: z.number().int().min(0).max(MAX_RECORDED_SIZE),
      }),
    )
    .max(1_000_000),
});

/** What one session's tree may hold (FORKLINE_WORKSPACE_MAX_BYTES, FORKLINE_WORKSPACE_MAX_FILES; docs/files.md "Limits"). */
export interface WorkspaceLimits {
  /** Bytes of all files of one session's tree. */
  maxBytes: number;
  /** Entries of one session's tree: its files and the directories they lie in. */
  maxFiles: number;
  /** Bytes of one file. */
  maxFileBytes: number;
}

export const DEFAULT_WORKSPACE_LIMITS: WorkspaceLimits = { maxBytes: 100 * 1024 * 1024, maxFiles: 20_000, maxFileBytes: 10 * 1024 * 1024 };

/** Why a tree breaks a session's quota (files and the directories they make count as entries), or undefined. */
export function quotaProblem(tree: Iterable<{ path: string; size: number }>, limits: WorkspaceLimits): string | undefined {
  const entries = [...tree];
  const big = entries.find((e) => e.size > limits.maxFileBytes);
  if (big) return `a file holds at most ${limits.maxFileBytes} bytes, and "${big.path}" has ${big.size}`;
  return new TreeUsage(entries).problem(limits);
}

/**
 * A tree's usage kept as change sets fold into it: bytes, files, and the
 * directories its paths make (each counted once, while anything lies in it);
 * and the paths that are a file and a directory at once (`a` beside `a/b`),
 * which no disk can hold. A directory counts what lies directly in it, so a
 * change costs the directories it makes or empties, not its depth: 9,750
 * files 500 directories deep (within the quota's entries) cost 5 million
 * directory updates when each counted every file below it, seconds of CPU at
 * every door and restore.
 */
export class TreeUsage {
  bytes = 0;
  files = 0;
  /** Directory → how many files and directories lie directly in it. */
  private readonly dirs = new Map<string, number>();
  private readonly sizes = new Map<string, number>();
  private readonly clashes = new Set<string>();

  constructor(tree: Iterable<{ path: string; size: number }> = []) {
    for (const e of tree) this.set(e.path, e.size);
  }

  get entries(): number {
    return this.files + this.dirs.size;
  }

  set(path: string, size: number | null): void {
    const old = this.sizes.get(path);
    if (old !== undefined) {
      this.bytes -= old;
      this.files--;
      this.sizes.delete(path);
      this.clashes.delete(path);
      this.leave(path);
    }
    if (size === null) return;
    this.sizes.set(path, size);
    this.bytes += size;
    this.files++;
    if (this.dirs.has(path)) this.clashes.add(path);
    this.enter(path);
  }

  /** `path` now lies in its directory; a directory made by it lies in its own, and so on up to one that was there. */
  private enter(path: string): void {
    for (let at = path.lastIndexOf('/'); at > 0; at = path.lastIndexOf('/', at - 1)) {
      const dir = path.slice(0, at);
      const n = this.dirs.get(dir) ?? 0;
      this.dirs.set(dir, n + 1);
      if (n > 0) return;
      if (this.sizes.has(dir)) this.clashes.add(dir);
    }
  }

  /** `path` no longer lies in its directory; a directory left empty is gone from its own, and so on up. */
  private leave(path: string): void {
    for (let at = path.lastIndexOf('/'); at > 0; at = path.lastIndexOf('/', at - 1)) {
      const dir = path.slice(0, at);
      const n = (this.dirs.get(dir) ?? 1) - 1;
      if (n > 0) {
        this.dirs.set(dir, n);
        return;
      }
      this.dirs.delete(dir);
      this.clashes.delete(dir);
    }
  }

  /** Why this usage breaks the quota, or the tree cannot be made on disk; undefined when neither. */
  problem(limits: WorkspaceLimits): string | undefined {
    const clash = this.clashes.values().next().value;
    if (clash !== undefined) return `"${clash}" would be both a file and a directory`;
    if (this.bytes > limits.maxBytes) return `the workspace quota is ${limits.maxBytes} bytes, and the files come to ${this.bytes}`;
    if (this.entries > limits.maxFiles) return `the workspace quota is ${limits.maxFiles} files and directories, and there are ${this.entries}`;
    return undefined;
  }
}

/**
 * The first change set, folded onto `tree` oldest first, that leaves a tree
 * past the quota (a fork at any event would make that tree on disk), or
 * undefined. Folds into `tree`.
 */
export function firstOverQuota(
  tree: FileTree,
  changeSets: Iterable<{ seq: number; data: FilesChangeData }>,
  limits: WorkspaceLimits,
): { seq: number; problem: string } | undefined {
  const usage = new TreeUsage(tree.values());
  for (const cs of changeSets) {
    for (const c of cs.data.changes) {
      if (c.hash !== null && c.size > limits.maxFileBytes)
        return { seq: cs.seq, problem: `a file holds at most ${limits.maxFileBytes} bytes, and "${c.path}" has ${c.size}` };
      usage.set(c.path, c.hash === null ? null : c.size);
    }
    foldFileTree([cs], tree);
    const problem = usage.problem(limits);
    if (problem) return { seq: cs.seq, problem };
  }
  return undefined;
}

/**
 * Folds change sets, oldest first, into the tree they leave. The caller passes
 * only change sets in effect (each one's result recorded, at or before the cut:
 * store/session-log.ts `fileChangeSetPages`).
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
  return [...tree.values()]
    .filter((e) => !prefix || e.path.startsWith(prefix) || e.path === dir)
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
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

/** The text of a file's bytes when they are UTF-8 without NUL (what a diff or `text` shows), else undefined. */
export function textOf(bytes: Uint8Array): string | undefined {
  if (bytes.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
