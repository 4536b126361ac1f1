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
import fs from 'node:fs/promises';
import path from 'node:path';
import { treeUsage, workspacePath, type FileChangeRecord } from '../core/file-tree.ts';
import { sha256, type FileBlobs } from '../store/file-blobs.ts';
import type { SessionLog } from '../store/session-log.ts';
import { ToolError } from './tool-error.ts';

export interface WorkspaceLimits {
  /** Bytes of all files of one session's tree (FORKLINE_WORKSPACE_MAX_BYTES). */
  maxBytes: number;
  /** Files of one session's tree (FORKLINE_WORKSPACE_MAX_FILES). */
  maxFiles: number;
  /** Bytes of one file. */
  maxFileBytes: number;
}

export const DEFAULT_WORKSPACE_LIMITS: WorkspaceLimits = { maxBytes: 100 * 1024 * 1024, maxFiles: 20_000, maxFileBytes: 10 * 1024 * 1024 };

/** Workspaces whose disk state a process remembers (others are made again when next needed). */
const REMEMBERED = 200;
/** Files written or stat'ed at once when a tree is made or walked. */
const PARALLEL = 32;

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
  for (let i = 0; i < items.length; i += PARALLEL) await Promise.all(items.slice(i, i + PARALLEL).map(fn));
}

const isMissing = (err: unknown) => ['ENOENT', 'ENOTDIR'].includes((err as { code?: string }).code ?? '');

/** The workspaces of the sessions this process runs, under one root directory. */
export class FileWorkspaces {
  private readonly open = new Map<string, FileWorkspace>();

  constructor(
    readonly root: string,
    readonly blobs: FileBlobs,
    readonly log: SessionLog,
    readonly limits: WorkspaceLimits = DEFAULT_WORKSPACE_LIMITS,
  ) {}

  /** The session's workspace (its disk state remembered while it is among the recently used). */
  of(sessionId: string): FileWorkspace {
    let ws = this.open.get(sessionId);
    if (ws) this.open.delete(sessionId);
    else ws = new FileWorkspace(sessionId, path.join(this.root, sessionId), this);
    this.open.set(sessionId, ws);
    if (this.open.size > REMEMBERED) this.open.delete(this.open.keys().next().value!);
    return ws;
  }

  /** Forgets a deleted session's workspace and removes its directory. */
  async discard(sessionId: string): Promise<void> {
    this.open.delete(sessionId);
    await fs.rm(path.join(this.root, sessionId), { recursive: true, force: true });
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

  constructor(
    readonly sessionId: string,
    readonly dir: string,
    private readonly owner: FileWorkspaces,
  ) {}

  /** The directory made current with the log, before a file tool works in it. */
  async ready(): Promise<string> {
    const last = await this.owner.log.lastFileChangeSeq(this.sessionId);
    if (!this.known || last !== this.syncedSeq) await this.materialise(last);
    return this.dir;
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

  /** Restores the tree as of the log's end: costs what the tree holds, once. */
  private async materialise(lastChangeSeq: number): Promise<void> {
    const tree = await this.owner.blobs.tree(this.sessionId);
    await fs.rm(this.dir, { recursive: true, force: true });
    await fs.mkdir(this.dir, { recursive: true });
    this.rootReal = await fs.realpath(this.dir);
    const known = new Map<string, Known>();
    const entries = [...tree.values()];
    for (let i = 0; i < entries.length; i += 500) {
      const page = entries.slice(i, i + 500);
      const contents = await this.owner.blobs.contents(page.map((e) => e.hash));
      await inBatches(page, async (e) => {
        const bytes = contents.get(e.hash);
        if (!bytes) throw new Error(`file workspace of ${this.sessionId}: the content of ${e.path} (${e.hash}) is missing`);
        const abs = path.join(this.dir, e.path);
        await fs.mkdir(path.dirname(abs), { recursive: true });
        await fs.writeFile(abs, bytes);
        const st = await fs.stat(abs, { bigint: true });
        known.set(e.path, { size: Number(st.size), mtimeNs: st.mtimeNs, hash: e.hash });
      });
    }
    this.known = known;
    this.syncedSeq = lastChangeSeq;
    this.touched.clear();
  }

  /**
   * Where a workspace path is on disk, or a ToolError: no absolute path, no
   * `..`, and no symlink on the way that leads out of the workspace.
   */
  async resolve(raw: string): Promise<{ rel: string; abs: string }> {
    const r = workspacePath(raw);
    if ('problem' in r) throw new ToolError(r.problem);
    await this.ready();
    const abs = r.path ? path.join(this.dir, r.path) : this.dir;
    // The deepest part of the path that exists, resolved through any symlinks, must lie inside the workspace.
    for (let probe = abs; ; probe = path.dirname(probe)) {
      try {
        const real = await fs.realpath(probe);
        if (real !== this.rootReal && !real.startsWith(this.rootReal + path.sep)) throw new ToolError(`"${raw}" leads outside the workspace`);
        break;
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
    }
    return { rel: r.path, abs };
  }

  async readFile(raw: string): Promise<Buffer> {
    const { rel, abs } = await this.resolve(raw);
    try {
      const st = await fs.stat(abs);
      if (!st.isFile()) throw new ToolError(`"${rel || '.'}" is not a file`);
      return await fs.readFile(abs);
    } catch (err) {
      if (isMissing(err)) throw new ToolError(`no file "${rel}"`);
      throw err;
    }
  }

  /** Writes a file, within the session's quota (checked before anything is written). */
  async writeFile(raw: string, content: Buffer): Promise<{ rel: string; created: boolean }> {
    const { rel, abs } = await this.resolve(raw);
    if (!rel) throw new ToolError('a file needs a name');
    const { maxBytes, maxFiles, maxFileBytes } = this.owner.limits;
    if (content.byteLength > maxFileBytes) throw new ToolError(`"${rel}" would be ${content.byteLength} bytes: a file holds at most ${maxFileBytes} bytes`);
    const known = this.known!;
    const old = known.get(rel);
    const usage = treeUsage(known.values());
    const bytes = usage.bytes - (old?.size ?? 0) + content.byteLength;
    if (bytes > maxBytes) throw new ToolError(`the workspace quota is ${maxBytes} bytes: writing "${rel}" would make it ${bytes} bytes; delete or shorten files first`);
    if (!old && usage.files + 1 > maxFiles) throw new ToolError(`the workspace quota is ${maxFiles} files: delete a file before adding "${rel}"`);
    try {
      const st = await fs.lstat(abs);
      if (!st.isFile()) throw new ToolError(`"${rel}" is not a regular file`);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
    this.touched.add(rel);
    await fs.mkdir(path.dirname(abs), { recursive: true });
    await fs.writeFile(abs, content);
    return { rel, created: !old };
  }

  async deleteFile(raw: string): Promise<string> {
    const { rel, abs } = await this.resolve(raw);
    const st = await fs.lstat(abs).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
    if (!st || !rel) throw new ToolError(`no file "${rel}"`);
    if (!st.isFile()) throw new ToolError(`"${rel}" is not a file`);
    this.touched.add(rel);
    await fs.rm(abs);
    return rel;
  }

  /** Regular files under a directory of the workspace, in path order, with their sizes. */
  async list(raw: string): Promise<Array<{ path: string; size: number }>> {
    const { rel, abs } = await this.resolve(raw);
    const st = await fs.stat(abs).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
    if (!st) throw new ToolError(`no directory "${rel}"`);
    if (st.isFile()) return [{ path: rel, size: st.size }];
    const out: Array<{ path: string; size: number }> = [];
    for (const f of await this.walk(abs)) out.push({ path: path.relative(this.dir, f.abs).split(path.sep).join('/'), size: f.size });
    return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  }

  /** Regular files under `absDir` (symlinks are not followed). */
  private async walk(absDir: string): Promise<Array<{ abs: string; size: number; mtimeNs: bigint }>> {
    const out: Array<{ abs: string; size: number; mtimeNs: bigint }> = [];
    const dirs = [absDir];
    while (dirs.length) {
      const d = dirs.pop()!;
      const entries = await fs.readdir(d, { withFileTypes: true }).catch((err) => (isMissing(err) ? [] : Promise.reject(err)));
      const files = entries.filter((e) => e.isFile());
      for (const e of entries) if (e.isDirectory()) dirs.push(path.join(d, e.name));
      await inBatches(files, async (e) => {
        const abs = path.join(d, e.name);
        const st = await fs.lstat(abs, { bigint: true });
        out.push({ abs, size: Number(st.size), mtimeNs: st.mtimeNs });
      });
    }
    return out;
  }

  /**
   * What the call changed, since the last sync: the paths it touched when it
   * says (`walk: false`, the built-in file tools: cost what changed), else the
   * whole tree by size and modification time (only what differs is read and
   * hashed). Updates what the disk is known to hold.
   */
  async capture(opts: { walk: boolean }): Promise<Capture> {
    const known = this.known;
    if (!known) return { changes: [], blobs: [] };
    const candidates = new Map<string, { size: number; mtimeNs: bigint } | undefined>();
    if (opts.walk) {
      for (const f of await this.walk(this.dir)) candidates.set(path.relative(this.dir, f.abs).split(path.sep).join('/'), f);
      for (const p of known.keys()) if (!candidates.has(p)) candidates.set(p, undefined);
    } else {
      for (const p of this.touched) {
        const st = await fs.lstat(path.join(this.dir, p), { bigint: true }).catch((err) => (isMissing(err) ? undefined : Promise.reject(err)));
        candidates.set(p, st?.isFile() ? { size: Number(st.size), mtimeNs: st.mtimeNs } : undefined);
      }
    }
    const changes: FileChangeRecord[] = [];
    const blobs: Capture['blobs'] = [];
    for (const [p, st] of candidates) {
      const k = known.get(p);
      if (!st) {
        if (k) changes.push({ path: p, hash: null, size: 0 });
        known.delete(p);
        continue;
      }
      // What the tool says it touched is always read: a rewrite within the clock's resolution keeps size and mtime.
      if (k && opts.walk && k.size === st.size && k.mtimeNs === st.mtimeNs) continue;
      const content = await fs.readFile(path.join(this.dir, p));
      const hash = sha256(content);
      known.set(p, { size: content.byteLength, mtimeNs: st.mtimeNs, hash });
      if (k?.hash === hash) continue;
      changes.push({ path: p, hash, size: content.byteLength });
      blobs.push({ hash, content });
    }
    this.touched.clear();
    // The built-in tools check the quota before they write; a command is only seen afterwards.
    const { maxBytes, maxFiles, maxFileBytes } = this.owner.limits;
    const usage = treeUsage(known.values());
    const tooBig = changes.find((c) => c.size > maxFileBytes);
    const problem =
      tooBig ? `a file holds at most ${maxFileBytes} bytes, and ${tooBig.path} has ${tooBig.size}`
      : usage.bytes > maxBytes ? `the workspace quota is ${maxBytes} bytes, and the files came to ${usage.bytes}`
      : usage.files > maxFiles ? `the workspace quota is ${maxFiles} files, and there came to be ${usage.files}`
      : undefined;
    if (problem) throw new ToolError(problem);
    changes.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
    return { changes, blobs };
  }
}

