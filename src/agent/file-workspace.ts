// A session's file workspace on the disk of the process running its agent
// (docs/contract.md#agent-loop). The log is the source of truth: the tree as of its
// end is the fold of its change sets (core/file-tree.ts), contents by hash in
// Postgres (store/file-blobs.ts). The directory is made from it lazily, the
// first time a file tool of the session needs it, and made again whenever
// the log moved without this process (another process ran the session, a
// call never completed, a fork's child starts): so every cut sees its files.
//
// After a call that may change files, `capture` compares what the call
// touched (or, for a tool that does not say, the whole tree) with what the
// disk held, by size and modification time, and hashes only what differs:
// its change set is stored with the call's result (session-runner.ts).
import { randomUUID } from 'node:crypto';
import type { BigIntStats, Dirent } from 'node:fs';
import fs, { type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import {
  changeSetPathProblem,
  contentProblem,
  DEFAULT_WORKSPACE_LIMITS,
  MAX_PATH_LENGTH,
  quotaProblem,
  TreeUsage,
  workspacePath,
  type FileChangeRecord,
  type FileEntry,
  type WorkspaceLimits,
} from '../core/file-tree.ts';
import { groupsBySize } from '../core/size-groups.ts';
import { CONTENT_PAGE_BYTES, ContentMismatchError, sha256, type FileBlobs } from '../store/file-blobs.ts';
import type { SessionLog } from '../store/session-log.ts';
import { ToolError } from './tool-error.ts';
import {
  createFileIn,
  findBelow,
  inDirectory,
  lstatIn,
  TreeDirectories,
  byPath,
  openDirectoryBelow,
  openSubdirectory,
  openToRead,
  openWorkspaceRoot,
  removeDirectory,
  type Found,
  type WorkspaceRoot,
} from './workspace-handles.ts';

export type { WorkspaceLimits } from '../core/file-tree.ts';

/** Bytes one tenant's workspaces may hold on this process's disk (FORKLINE_TENANT_WORKSPACES_MAX_BYTES). */
export const DEFAULT_TENANT_WORKSPACES_MAX_BYTES = 1024 * 1024 * 1024;

export interface WorkspacesOptions {
  /** The tenant a session belongs to (its workspaces share the tenant's total). */
  tenantOf?: (sessionId: string) => Promise<string | undefined>;
  /** Bytes one tenant's workspaces may hold on this process's disk: idle ones are evicted first. */
  tenantMaxBytes?: number;
  log?: (msg: string, err?: unknown) => void;
  /** Writes a file's bytes into the new file `file`, made at `abs` (tests put a failing disk here). */
  writeBytes?: (file: FileHandle, bytes: Uint8Array, abs: string) => Promise<void>;
}

/** Workspaces whose disk state a process remembers (others are made again when next needed). */
const REMEMBERED = 200;
/** Files written or stat'ed at once when a tree is made or walked. */
const PARALLEL = 32;
/** Files of a tree made with one set of directory handles (each directory they lie in held open meanwhile). */
const FILES_PER_PAGE = 500;

/** What the disk holds at a path, as of the last sync. */
interface Known {
  size: number;
  mtimeNs: bigint;
  hash: string;
}

/** A call's capture: the change set to record and the contents it names. */
export interface Capture {
  changes: FileChangeRecord[];
  blobs: Array<{ hash: string; content: Buffer }>;
}

async function inBatches<T>(items: readonly T[], fn: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += PARALLEL) {
    // Every call of a batch has ended before one's failure is thrown: none still writes once the caller cleans up.
    const failed = (await Promise.allSettled(items.slice(i, i + PARALLEL).map(fn))).find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

/**
 * A file's content, read only up to `max` bytes through a handle that holds
 * it: a file that grew past it since it was stat'ed (a command still
 * writing) is refused by `tooBig`, not read whole.
 */
async function readAtMost(handle: FileHandle, max: number, tooBig: () => ToolError): Promise<Buffer> {
  const { size } = await handle.stat();
  // Sized by what the file holds now (plus one byte, to see it grow), never past max + 1.
  let buf = Buffer.allocUnsafe(Math.min(max + 1, size + 1));
  let n = 0;
  for (;;) {
    const { bytesRead } = await handle.read(buf, n, buf.length - n, n);
    if (bytesRead === 0) break;
    n += bytesRead;
    if (n > max) throw tooBig();
    if (n === buf.length) buf = Buffer.concat([buf, Buffer.allocUnsafe(Math.min(max + 1, 2 * buf.length) - buf.length)]);
  }
  return buf.subarray(0, n);
}

/**
 * The content of the regular file `found` (workspace-handles.ts), at most
 * `max` bytes; the handle `found` holds is closed.
 */
async function readFound(found: Found, shown: string, max: number, tooBig: () => ToolError): Promise<Buffer> {
  try {
    const file = await openToRead(found, shown);
    try {
      return await readAtMost(file, max, tooBig);
    } finally {
      await file.close();
    }
  } finally {
    await found.handle.close();
  }
}

/** A workspace path: `name` in the directory `dir` ('' : the workspace itself). */
const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);

/** A regular file a walk found: its workspace path, its size and modification time. */
interface WalkedFile {
  rel: string;
  size: number;
  mtimeNs: bigint;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** What an entry that is neither a file, a directory nor a symlink is, in words. */
const kindOf = (e: Dirent<Buffer>) =>
  e.isFIFO() ? 'FIFO' : e.isSocket() ? 'socket' : e.isCharacterDevice() || e.isBlockDevice() ? 'device node' : 'special file';

/** Deleted sessions a process remembers, so a late call cannot make their directory again. */
const GONE_REMEMBERED = 10_000;

/**
 * The workspaces of the sessions this process runs, under one root
 * directory. A directory is a cache of its log (docs/files.md): one that
 * falls out of the remembered set, or an idle one whose tenant needs the room
 * (FORKLINE_TENANT_WORKSPACES_MAX_BYTES), is removed and made again when next needed.
 */
export class FileWorkspaces {
  private readonly open = new Map<string, FileWorkspace>();
  private readonly gone = new Set<string>();
  readonly tenantMaxBytes: number;
  readonly writeBytes: (file: FileHandle, bytes: Uint8Array, abs: string) => Promise<void>;

  constructor(
    readonly root: string,
    readonly blobs: FileBlobs,
    readonly log: SessionLog,
    readonly limits: WorkspaceLimits = DEFAULT_WORKSPACE_LIMITS,
    private readonly opts: WorkspacesOptions = {},
  ) {
    this.tenantMaxBytes = opts.tenantMaxBytes ?? DEFAULT_TENANT_WORKSPACES_MAX_BYTES;
    this.writeBytes = opts.writeBytes ?? ((file, bytes) => file.writeFile(bytes));
  }

  /** The session's workspace (its disk state remembered while it is among the recently used). */
  of(sessionId: string): FileWorkspace {
    let ws = this.open.get(sessionId);
    if (ws) this.open.delete(sessionId);
    else ws = new FileWorkspace(sessionId, path.join(this.root, sessionId), this);
    this.open.set(sessionId, ws);
    if (this.open.size > REMEMBERED) {
      const oldest = this.open.values().next().value!;
      this.open.delete(oldest.sessionId);
      if (!oldest.busy) void this.evict(oldest);
    }
    return ws;
  }

  /** The sessions whose directories are remembered (each may be on disk). */
  sessionIds(): string[] {
    return [...this.open.keys()];
  }

  /** Whether the session was deleted (its directory is never made again). */
  isGone(sessionId: string): boolean {
    return this.gone.has(sessionId);
  }

  /** The tenant of a session, for its share of the tenant's total ('' when unknown). */
  async tenantOf(sessionId: string): Promise<string> {
    return (await this.opts.tenantOf?.(sessionId)) ?? '';
  }

  /**
   * Room for `ws` to hold `bytes` on disk within its tenant's total: idle
   * workspaces of the tenant are evicted, least recently used first; a
   * ToolError when that is not enough.
   */
  async makeRoom(ws: FileWorkspace, bytes: number): Promise<void> {
    const others = () => [...this.open.values()].filter((o) => o !== ws && o.tenant === ws.tenant && o.diskBytes > 0);
    const total = () => others().reduce((n, o) => n + o.diskBytes, bytes);
    for (const o of others()) {
      if (total() <= this.tenantMaxBytes) return;
      if (!o.busy) await this.evict(o);
    }
    if (total() > this.tenantMaxBytes) {
      throw new ToolError(
        `this tenant's workspaces may hold ${this.tenantMaxBytes} bytes on this server (FORKLINE_TENANT_WORKSPACES_MAX_BYTES), and this one would make them ${total()}; delete or shorten files first`,
      );
    }
  }

  /** Removes an idle workspace's directory: made again from the log when next needed. */
  async evict(ws: FileWorkspace): Promise<void> {
    ws.invalidate();
    ws.diskBytes = 0;
    // A restore that starts meanwhile waits for the removal (it would remove what the restore writes).
    ws.removal = removeDirectory(ws.dir).catch((err) => this.opts.log?.(`evicting the file workspace of ${ws.sessionId} failed`, err));
    await ws.removal;
  }

  /**
   * Forgets a deleted session's workspace and removes its directory: a
   * restore under way is stopped first, so it cannot write after the removal.
   */
  async discard(sessionId: string): Promise<void> {
    if (this.gone.has(sessionId)) return; // the deletion's own process hears of it twice (its mutation, its NOTIFY)
    this.gone.add(sessionId);
    if (this.gone.size > GONE_REMEMBERED) this.gone.delete(this.gone.values().next().value!);
    const ws = this.open.get(sessionId);
    this.open.delete(sessionId);
    if (ws) await ws.stop();
    // Starting `rm` holds the event loop for a while in a large process (tens of ms): a deleted
    // tree of a thousand forks spawned one per session at once and held it for seconds. Only
    // directories that exist are removed, one at a time.
    const dir = path.join(this.root, sessionId);
    const exists = await fs.lstat(dir).then(
      () => true,
      () => false,
    );
    if (!exists) return;
    const removed = this.removals.then(() => removeDirectory(dir));
    this.removals = removed.catch(() => {});
    await removed;
  }

  private removals: Promise<void> = Promise.resolve();
  private makings = 0;

  /** A number for a directory's making, never given twice (a workspace forgotten and remembered again counts on). */
  nextMaking(): number {
    return ++this.makings;
  }
}

export class FileWorkspace {
  /** What the disk holds, when it is known to match the log as of `syncedSeq`; undefined: make it again. */
  private known?: Map<string, Known>;
  /** The seq of the last change set the directory reflects (-1: none). */
  private syncedSeq = -1;
  /** Paths the running call wrote or deleted (a built-in file tool says which). */
  private readonly touched = new Set<string>();
  private rootReal?: string;
  /** A restore under way (deletion waits for it to stop). */
  private restoring?: Promise<void>;
  /** Calls working in the directory now (an idle workspace may be evicted). */
  private users = 0;
  /** What a process did to the directory outside any call is undone once the calls working in it now are over (`undo`). */
  private undoWhenIdle = false;
  /** Its session's tenant, once known; its bytes on disk count toward the tenant's total. */
  tenant?: string;
  diskBytes = 0;
  /** Bytes, files and directories of what the disk is known to hold (kept with `known`). */
  private usage = new TreeUsage();
  /** An eviction's removal of the directory, under way or done. */
  removal?: Promise<void>;
  /** Directories (empty ones too) and symlinks the last walk found. */
  private walkedOthers = 0;
  /** Which making of the directory this is (unique in the process): a process started in an earlier one (a workspace MCP server) works in a directory that is gone. */
  made = 0;

  constructor(
    readonly sessionId: string,
    readonly dir: string,
    private readonly owner: FileWorkspaces,
  ) {}

  get busy(): boolean {
    return this.users > 0 || this.restoring !== undefined;
  }

  /** The session's quota (what a command may write is held to its per-file cap while it runs: shell-tool.ts). */
  get limits(): WorkspaceLimits {
    return this.owner.limits;
  }

  /** A call works in the directory until `leave` (it is not evicted meanwhile). */
  enter(): void {
    this.users++;
  }

  leave(): void {
    this.users--;
    if (this.users > 0 || !this.undoWhenIdle) return;
    this.undoWhenIdle = false;
    void this.owner.evict(this);
  }

  /**
   * Undoes what a process did to the directory outside the log (a workspace MCP server past its quota between its
   * calls): the directory is removed, its disk freed, and made again from the log when next needed. A call working in
   * it now is not pulled from under it (its capture would be skipped, its changes lost): removed once it is over.
   */
  undo(): void {
    if (this.users > 0) this.undoWhenIdle = true;
    else void this.owner.evict(this);
  }

  /** The directory made current with the log, before a file tool works in it. */
  async ready(): Promise<string> {
    if (this.owner.isGone(this.sessionId)) throw new ToolError('this session was deleted');
    const last = await this.owner.log.lastFileChangeSeq(this.sessionId);
    if (!this.known || last !== this.syncedSeq) {
      const restore = this.materialise(last);
      this.restoring = restore;
      try {
        await restore;
      } finally {
        if (this.restoring === restore) this.restoring = undefined;
      }
    }
    return this.dir;
  }

  /** Waits for a restore under way to stop (the session was deleted: it stops at its next file). */
  async stop(): Promise<void> {
    this.invalidate();
    await this.restoring?.catch(() => {});
  }

  /** Whether a call may have changed the directory since it was last made or captured. */
  get materialised(): boolean {
    return this.known !== undefined;
  }

  /** The disk may no longer match the log (a call never completed, an append failed): made again when next needed. */
  invalidate(): void {
    this.known = undefined;
    this.touched.clear();
  }

  /** The change set recorded at `seq` is the directory's state now. */
  synced(seq: number): void {
    if (this.known) this.syncedSeq = seq;
  }

  /**
   * Restores the tree as of the log's end: costs what the tree holds, once.
   * The tree is held to the rules every door holds change sets to (a row
   * stored before them might not keep them): each path by the one rule and
   * inside the directory once resolved, the session's quota, the tenant's
   * total; and each content to its hash and size (core/file-tree.ts
   * `contentProblem`), read CONTENT_PAGE_BYTES at a time, not the tree at
   * once. A restore refused or failed leaves no directory, never part of a
   * tree; one stops, and leaves none, once the session is deleted.
   */
  private async materialise(lastChangeSeq: number): Promise<void> {
    this.known = undefined;
    await this.removal;
    const stopped = () => this.owner.isGone(this.sessionId);
    const cannot = (why: string) => new ToolError(`the files of this session cannot be made: ${why}`);
    try {
      const tree = await this.owner.blobs.tree(this.sessionId);
      const entries = [...tree.values()];
      for (const e of entries) {
        const problem = changeSetPathProblem(e.path);
        if (problem) throw new ToolError(`the log names a file at ${JSON.stringify(e.path)}, which is refused (${problem}): the files cannot be made`);
      }
      const overQuota = quotaProblem(entries, this.owner.limits);
      if (overQuota) throw cannot(overQuota);
      // Every content as stored (the tenant's copy), before anything is written: the quota above counted the sizes the log claims.
      const owner = await this.owner.blobs.tenantOf(this.sessionId);
      const sizes = await this.owner.blobs.storedSizes(
        owner,
        entries.map((e) => e.hash),
      );
      const byHash = new Map<string, FileEntry[]>();
      for (const e of entries) {
        const size = sizes.get(e.hash);
        if (size === undefined) throw cannot(`the content of "${e.path}" (${e.hash}) is missing`);
        const problem = contentProblem(e, { size });
        if (problem) throw cannot(`the log ${problem}`);
        (byHash.get(e.hash) ?? byHash.set(e.hash, []).get(e.hash)!).push(e);
      }
      this.tenant ??= await this.owner.tenantOf(this.sessionId);
      const bytes = entries.reduce((n, e) => n + e.size, 0);
      this.diskBytes = 0;
      await this.owner.makeRoom(this, bytes);
      await removeDirectory(this.dir);
      this.made = this.owner.nextMaking();
      if (stopped()) throw new ToolError('this session was deleted');
      await fs.mkdir(this.dir, { recursive: true });
      this.rootReal = await fs.realpath(this.dir);
      // Each file is made through its directory's handle, opened without following a symlink
      // (workspace-handles.ts): a symlink a still-running process puts in a directory's place
      // cannot send a write outside the workspace.
      const root = await openWorkspaceRoot(this.dir, this.rootReal);
      const directories = new TreeDirectories(root);
      const known = new Map<string, Known>();
      try {
        // A page of contents at a time, each read once however many paths hold it.
        const pages = groupsBySize(
          [...byHash].map(([item, named]) => ({ item, bytes: named[0].size })),
          CONTENT_PAGE_BYTES,
        );
        for (const hashes of pages) {
          const contents = await this.owner.blobs.contents(owner, hashes).catch((err) => {
            if (!(err instanceof ContentMismatchError)) throw err;
            const named = byHash.get(err.hash)![0];
            throw cannot(contentProblem(named, err.found) ?? err.message);
          });
          // In path order: the directories on the way are opened once a page of contents, however deep.
          const page = hashes.flatMap((h) => byHash.get(h)!).sort((a, b) => byPath(a.path, b.path));
          for (let i = 0; i < page.length; i += FILES_PER_PAGE) {
            await this.writeEntries(directories, page.slice(i, i + FILES_PER_PAGE), contents, known, stopped, cannot);
          }
        }
      } finally {
        await directories.close();
        await root.handle.close();
      }
      if (stopped()) throw new ToolError('this session was deleted');
      this.known = known;
      this.usage = new TreeUsage(entries);
      this.diskBytes = bytes;
      this.syncedSeq = lastChangeSeq;
      this.touched.clear();
    } catch (err) {
      // Nothing of a tree that was not made whole stays on disk (a deletion that came meanwhile removes it too:
      // whichever ends last removes it). The next file tool makes it again from the log.
      this.diskBytes = 0;
      await removeDirectory(this.dir);
      throw err;
    }
  }

  /** Writes `entries` of a tree being made, their contents in `contents`, each through its directory's handle. */
  private async writeEntries(
    directories: TreeDirectories,
    entries: readonly FileEntry[],
    contents: ReadonlyMap<string, Buffer>,
    known: Map<string, Known>,
    stopped: () => boolean,
    cannot: (why: string) => ToolError,
  ): Promise<void> {
    const dirOf = (p: string) => p.slice(0, Math.max(0, p.lastIndexOf('/')));
    const dirs = await directories.open(entries.map((e) => dirOf(e.path)));
    try {
      await inBatches(entries, async (e) => {
        if (stopped()) throw new ToolError('this session was deleted');
        const bytes = contents.get(e.hash);
        // Deleted since its size was read (the last session holding it went meanwhile).
        if (!bytes) throw cannot(`the content of "${e.path}" (${e.hash}) is missing`);
        const file = await createFileIn(dirs.get(dirOf(e.path))!, e.path.slice(e.path.lastIndexOf('/') + 1)).catch((err) =>
          Promise.reject((err as { code?: string }).code === 'EEXIST' ? new ToolError(`"${e.path}" could not be made: something else is in its place`) : err),
        );
        try {
          await this.owner.writeBytes(file, bytes, path.join(this.dir, e.path));
          const st = await file.stat({ bigint: true });
          known.set(e.path, { size: Number(st.size), mtimeNs: st.mtimeNs, hash: e.hash });
        } finally {
          await file.close();
        }
      });
    } finally {
      await Promise.all([...dirs.values()].map((d) => d.close()));
    }
  }

  /**
   * A workspace path by its spelling (no absolute path, no `..`), with the
   * directory made current. Where it leads is found on disk only where the
   * act happens, through handles (workspace-handles.ts): a path checked here
   * and opened again by name later could lead elsewhere by then.
   */
  private async resolve(raw: string): Promise<string> {
    const r = workspacePath(raw);
    if ('problem' in r) throw new ToolError(r.problem);
    await this.ready();
    return r.path;
  }

  /** Runs `fn` with the workspace directory open (not a symlink in its place). */
  private async withRoot<T>(fn: (root: WorkspaceRoot) => Promise<T>): Promise<T> {
    const root = await openWorkspaceRoot(this.dir, this.rootReal!);
    try {
      return await fn(root);
    } finally {
      await root.handle.close();
    }
  }

  async readFile(raw: string): Promise<Buffer> {
    const rel = await this.resolve(raw);
    if (!rel) throw new ToolError(`"." is not a file`);
    const { maxFileBytes } = this.owner.limits;
    // A symlink inside the workspace is followed, one that leads out is refused without a look at where it leads.
    return this.withRoot(async (root) => {
      const found = await findBelow(root, rel, rel, true);
      if (!found) throw new ToolError(`no file "${rel}"`);
      return readFound(found, rel, maxFileBytes, () => new ToolError(`a file holds at most ${maxFileBytes} bytes, and ${rel} has more`));
    });
  }

  /** Writes a file, within the session's quota (checked before anything is written). */
  async writeFile(raw: string, content: Buffer): Promise<{ rel: string; created: boolean }> {
    const rel = await this.resolve(raw);
    if (!rel) throw new ToolError('a file needs a name');
    const { maxBytes, maxFiles, maxFileBytes } = this.owner.limits;
    if (content.byteLength > maxFileBytes) throw new ToolError(`"${rel}" would be ${content.byteLength} bytes: a file holds at most ${maxFileBytes} bytes`);
    const known = this.known!;
    const old = known.get(rel);
    // The usage with this write, then as it is (the write may not happen).
    this.usage.set(rel, content.byteLength);
    const [bytes, entries] = [this.usage.bytes, this.usage.entries];
    this.usage.set(rel, old ? old.size : null);
    if (bytes > maxBytes)
      throw new ToolError(`the workspace quota is ${maxBytes} bytes: writing "${rel}" would make it ${bytes} bytes; delete or shorten files first`);
    if (entries > maxFiles) throw new ToolError(`the workspace quota is ${maxFiles} files and directories: delete a file before adding "${rel}"`);
    await this.owner.makeRoom(this, this.diskBytes - (old?.size ?? 0) + content.byteLength);
    this.touched.add(rel);
    // Through the directory's handle (workspace-handles.ts): a symlink put in place of a directory meanwhile leads nowhere.
    const name = rel.slice(rel.lastIndexOf('/') + 1);
    await this.inDirectoryOf(rel, true, async (dir) => {
      const st = await lstatIn(dir, name);
      if (st && !st.isFile()) throw new ToolError(`"${rel}" is not a regular file`);
      // A temporary file renamed over the old one: a write that fails (a full disk) leaves the old content whole.
      const temporary = `.forkline-${randomUUID()}.tmp`;
      try {
        const file = await createFileIn(dir, temporary);
        try {
          await this.owner.writeBytes(file, content, path.join(this.dir, rel));
        } finally {
          await file.close();
        }
        await fs.rename(inDirectory(dir, temporary), inDirectory(dir, name));
      } catch (err) {
        await fs.rm(inDirectory(dir, temporary), { force: true });
        throw new ToolError(`"${rel}" could not be written (${(err as { code?: string }).code ?? (err as Error).message}); it is unchanged`);
      }
    });
    return { rel, created: !old };
  }

  /** Runs `fn` with the directory of workspace path `rel` open (made when `create`), reached without following a symlink. */
  private async inDirectoryOf<T>(rel: string, create: boolean, fn: (dir: FileHandle) => Promise<T>): Promise<T> {
    const at = rel.lastIndexOf('/');
    return this.withRoot(async (root) => {
      const dir = await openDirectoryBelow(root, at < 0 ? '' : rel.slice(0, at), create, rel);
      try {
        return await fn(dir);
      } finally {
        await dir.close();
      }
    });
  }

  async deleteFile(raw: string): Promise<string> {
    const rel = await this.resolve(raw);
    if (!rel) throw new ToolError(`no file "${rel}"`);
    const name = rel.slice(rel.lastIndexOf('/') + 1);
    await this.inDirectoryOf(rel, false, async (dir) => {
      const st = await lstatIn(dir, name);
      if (!st) throw new ToolError(`no file "${rel}"`);
      if (!st.isFile()) throw new ToolError(`"${rel}" is not a file`);
      this.touched.add(rel);
      await fs.unlink(inDirectory(dir, name));
    });
    return rel;
  }

  /** Regular files under a directory of the workspace (symlinks inside it followed to find it), in path order, with their sizes. */
  async list(raw: string): Promise<Array<{ path: string; size: number }>> {
    const rel = await this.resolve(raw);
    return this.withRoot(async (root) => {
      const found = await findBelow(root, rel, rel || '.', true);
      if (!found) throw new ToolError(`no directory "${rel}"`);
      try {
        if (found.stat.isFile()) return [{ path: rel, size: found.stat.size }];
        if (!found.stat.isDirectory()) throw new ToolError(`"${rel}" is not a regular file`);
        const out = (await this.walk(found.handle, found.rel)).map((f) => ({ path: f.rel, size: f.size }));
        return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      } finally {
        await found.handle.close();
      }
    });
  }

  /**
   * Regular files under `top`, the workspace directory `relDir`. What a command
   * left is held to what a tree may hold as it is met: every entry counts
   * toward the quota's entries (a walk stops past it, so a million names cost
   * what the quota allows, not a million stats), and a name that is not
   * UTF-8, a FIFO, socket or device node, or a directory deeper than a path
   * may be stops it (none of them can be recorded, and a FIFO would block a
   * reader). Symlinks are counted, never followed: each directory is opened
   * through its parent's handle, not by its name.
   */
  private async walk(top: FileHandle, relDir: string): Promise<WalkedFile[]> {
    const { maxFiles } = this.owner.limits;
    const out: WalkedFile[] = [];
    let entries = 0;
    this.walkedOthers = 0;
    const visit = async (dir: FileHandle, rel: string): Promise<void> => {
      const files: string[] = [];
      const subdirs: string[] = [];
      for await (const e of await fs.opendir(inDirectory(dir, '.'), { encoding: 'buffer' as BufferEncoding })) {
        const entry = e as unknown as Dirent<Buffer>;
        let name: string;
        try {
          name = strictUtf8.decode(entry.name);
        } catch {
          throw new ToolError(`a file was left at ${JSON.stringify(join(rel, entry.name.toString('utf8')))}, which cannot be recorded (its name is not UTF-8)`);
        }
        const p = join(rel, name);
        if (++entries > maxFiles) throw new ToolError(`the workspace quota is ${maxFiles} files and directories, and the call left more`);
        if (entry.isFile()) files.push(name);
        else if (entry.isDirectory()) {
          if (p.length > MAX_PATH_LENGTH)
            throw new ToolError(`a directory was left at "${p.slice(0, 64)}…", deeper than a path may be (${MAX_PATH_LENGTH} characters)`);
          subdirs.push(name);
          this.walkedOthers++;
        } else if (entry.isSymbolicLink()) this.walkedOthers++;
        else throw new ToolError(`a ${kindOf(entry)} was left at ${JSON.stringify(p)}: a workspace holds files, directories and symlinks, nothing else`);
      }
      await inBatches(files, async (name) => {
        const st = await lstatIn(dir, name, { bigint: true });
        // Gone, or no longer a file, since the directory was read: as if the walk had not met it.
        if (st?.isFile()) out.push({ rel: join(rel, name), size: Number(st.size), mtimeNs: st.mtimeNs });
      });
      for (const name of subdirs) {
        const sub = await openSubdirectory(dir, name);
        if (!sub) continue; // gone or replaced since it was listed: not followed
        try {
          await visit(sub, join(rel, name));
        } finally {
          await sub.close();
        }
      }
    };
    await visit(top, relDir);
    return out;
  }

  /**
   * Refuses, by the sizes the disk reports and before any content is read, a
   * call that left a file over the per-file cap or the tree over the quota:
   * a command can leave files of any size, and reading them whole to learn
   * that would take the process's memory.
   */
  private refuseOverQuota(known: Map<string, Known>, candidates: Map<string, { size: number } | undefined>): void {
    const { maxBytes, maxFileBytes } = this.owner.limits;
    let bytes = 0;
    for (const [p, k] of known) if (!candidates.has(p)) bytes += k.size;
    for (const [p, st] of candidates) {
      if (!st) continue;
      if (st.size > maxFileBytes) throw new ToolError(`a file holds at most ${maxFileBytes} bytes, and ${p} has ${st.size}`);
      bytes += st.size;
    }
    if (bytes > maxBytes) throw new ToolError(`the workspace quota is ${maxBytes} bytes, and the files came to ${bytes}`);
  }

  /**
   * What the call changed, since the last sync: the paths it touched when it
   * says (`walk: false`, the built-in file tools: cost what changed), else the
   * whole tree by size and modification time (only what differs is read and
   * hashed). Updates what the disk is known to hold. Everything is reached
   * through the workspace's handle without following a symlink, and what is
   * read is bounded by the quota, not by what the sizes said: a process still
   * running may grow a file between its stat and its read.
   */
  async capture(opts: { walk: boolean }): Promise<Capture> {
    const known = this.known;
    if (!known) return { changes: [], blobs: [] };
    return this.withRoot((root) => this.captureIn(root, known, opts));
  }

  private async captureIn(root: WorkspaceRoot, known: Map<string, Known>, opts: { walk: boolean }): Promise<Capture> {
    const candidates = new Map<string, { size: number; mtimeNs: bigint } | undefined>();
    if (opts.walk) {
      for (const f of await this.walk(root.handle, '')) candidates.set(f.rel, f);
      for (const p of known.keys()) if (!candidates.has(p)) candidates.set(p, undefined);
    } else {
      for (const p of this.touched) {
        // A path the tool wrote, through the workspace's own directories: what is no file there (any more) is as deleted.
        const found = await findBelow(root, p, p, false).catch((err) => (err instanceof ToolError ? undefined : Promise.reject(err)));
        let st: BigIntStats | undefined;
        if (found) st = await found.handle.stat({ bigint: true }).finally(() => found.handle.close());
        candidates.set(p, st?.isFile() ? { size: Number(st.size), mtimeNs: st.mtimeNs } : undefined);
      }
    }
    // A name a command may make that no change set may record (a backslash, a path past 1,024 characters).
    for (const p of candidates.keys()) {
      const problem = changeSetPathProblem(p);
      if (problem) throw new ToolError(`a file was left at ${JSON.stringify(p)}, which cannot be recorded (${problem})`);
    }
    this.refuseOverQuota(known, candidates);
    const changes: FileChangeRecord[] = [];
    const blobs: Capture['blobs'] = [];
    const { maxBytes, maxFiles, maxFileBytes } = this.owner.limits;
    // Bytes the tree is already known to hold: a read past what is left of the quota is refused as it happens.
    let held = 0;
    for (const [p, k] of known) if (!candidates.has(p)) held += k.size;
    for (const [p, st] of candidates) {
      const k = known.get(p);
      if (!st) {
        if (k) changes.push({ path: p, hash: null, size: 0 });
        known.delete(p);
        this.usage.set(p, null);
        continue;
      }
      // What the tool says it touched is always read: a rewrite within the clock's resolution keeps size and mtime.
      if (k && opts.walk && k.size === st.size && k.mtimeNs === st.mtimeNs) {
        held += k.size;
        continue;
      }
      const room = Math.max(0, maxBytes - held);
      const tooBig = () =>
        new ToolError(
          room < maxFileBytes
            ? `the workspace quota is ${maxBytes} bytes, and the files came to more`
            : `a file holds at most ${maxFileBytes} bytes, and ${p} has more`,
        );
      const content = await findBelow(root, p, p, false)
        .then((found) => found && readFound(found, p, Math.min(maxFileBytes, room), tooBig))
        .catch((err) => Promise.reject(err instanceof ToolError ? new ToolError(`"${p}" changed while the call's files were recorded: ${err.message}`) : err));
      if (!content) {
        // Gone since it was seen: as deleted.
        if (k) changes.push({ path: p, hash: null, size: 0 });
        known.delete(p);
        this.usage.set(p, null);
        continue;
      }
      held += content.byteLength;
      const hash = sha256(content);
      known.set(p, { size: content.byteLength, mtimeNs: st.mtimeNs, hash });
      this.usage.set(p, content.byteLength);
      if (k?.hash === hash) continue;
      changes.push({ path: p, hash, size: content.byteLength });
      blobs.push({ hash, content });
    }
    this.touched.clear();
    // The built-in tools check the quota before they write; a command is only seen afterwards.
    const usage = this.usage;
    // Directories and symlinks count as entries too, empty directories included (a walk sees those).
    const entries = Math.max(usage.entries, usage.files + (opts.walk ? this.walkedOthers : 0));
    const tooBig = changes.find((c) => c.size > maxFileBytes);
    const problem = tooBig
      ? `a file holds at most ${maxFileBytes} bytes, and ${tooBig.path} has ${tooBig.size}`
      : usage.bytes > maxBytes
        ? `the workspace quota is ${maxBytes} bytes, and the files came to ${usage.bytes}`
        : entries > maxFiles
          ? `the workspace quota is ${maxFiles} files and directories, and there came to be ${entries}`
          : undefined;
    if (problem) throw new ToolError(problem);
    this.diskBytes = usage.bytes;
    await this.owner.makeRoom(this, usage.bytes);
    changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return { changes, blobs };
  }
}
