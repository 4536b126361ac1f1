// Session file workspaces in Postgres: file contents stored once per tenant
// by sha-256 (FileBlob, deduplicated across the tenant's sessions, never
// between tenants: docs/files.md "Contents are stored once per tenant"), which
// session stored which blob (SessionBlob: deletion removes the blobs no
// remaining session of the tenant stored), and the reads that need no agent: the tree as of a seq, one file,
// and what changed between two seqs. The tree itself is the fold of the log's
// change sets (core/file-tree.ts; store/session-log.ts `fileChangeSetPages`),
// from the nearest checkpoint (store/file-tree-checkpoints.ts).
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { badInput, ForklineError, sessionNotFound } from '../core/errors.ts';
import { groupsBySize } from '../core/size-groups.ts';
import {
  contentProblem,
  DEFAULT_WORKSPACE_LIMITS,
  FILES_CHANGE,
  filesChangeDataSchema,
  firstOverQuota,
  listTree,
  textOf,
  treeChanges,
  workspacePath,
  type FileEntry,
  type FileTree,
  type FileChangeKind,
  type FilesChangeData,
  type WorkspaceLimits,
} from '../core/file-tree.ts';
import { unifiedDiff } from '../core/unified-diff.ts';
import { chunksOf, isChunked } from '../core/file-chunks.ts';
import type { RecordingBlob } from '../core/recording.ts';
import { FileTreeCheckpoints } from './file-tree-checkpoints.ts';
import { CHANGE_SET_PAGE, type ChangeSetPage, type Db, type LogRef, type SessionLog } from './session-log.ts';

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Session.file hands back contents up to this size (a bigger file: its entry, no content). */
export const FILE_READ_MAX_BYTES = 1024 * 1024;
/** Session.fileChanges diffs texts up to this size per side. */
export const DIFF_MAX_BYTES = 256 * 1024;
/** Distinct contents one request may name without carrying them (FORKLINE_MAX_NAMED_FILE_HASHES). */
export const DEFAULT_MAX_NAMED_HASHES = 20_000;
/** One fileChanges read diffs texts of at most this many bytes in all (both sides); the rest get no diff. */
export const DIFF_REQUEST_MAX_BYTES = 4 * 1024 * 1024;
/** One fileChanges read spends at most this long on its diffs, all together (core/unified-diff.ts). */
export const DIFF_REQUEST_TIMEOUT_MS = 2000;
/** Blobs read per statement when a tree is materialised. */
const BLOB_PAGE = 500;
/** Bytes of contents read per statement for a recording's blob lines and a restored tree (recordingBlobs, agent/file-workspace.ts). */
export const CONTENT_PAGE_BYTES = 16 * 1024 * 1024;

/** Contents laid end to end for one bytea parameter: where each starts, 1-based as Postgres's substring counts. */
class Contents {
  readonly #parts: Uint8Array[] = [];
  #bytes = 0;
  add(content: Uint8Array): number {
    this.#parts.push(content);
    this.#bytes += content.byteLength;
    return this.#bytes - content.byteLength + 1;
  }
  /** A Buffer: pg sends a Buffer parameter as binary, anything else as text. */
  joined(): Buffer {
    return Buffer.concat(this.#parts, this.#bytes);
  }
}

/** Stored content that is not what its hash names (a row changed since it was stored, a chunk list that lost a chunk): never served or written. */
export class ContentMismatchError extends Error {
  constructor(
    readonly hash: string,
    /** What the bytes read are: their sha-256 and size. */
    readonly found: { hash: string; size: number },
  ) {
    super(contentProblem({ hash }, found));
    this.name = 'ContentMismatchError';
  }
}

export interface FileContent extends FileEntry {
  /** The content as text when it is UTF-8 (no NUL), and within FILE_READ_MAX_BYTES. */
  text: string | null;
  /** The content in base64 when it is not text, within FILE_READ_MAX_BYTES. */
  base64: string | null;
}

export interface FileChange {
  path: string;
  kind: FileChangeKind;
  before: FileEntry | null;
  after: FileEntry | null;
  /** A unified diff when both sides are text within DIFF_MAX_BYTES and the read's diff budget; null otherwise. */
  diff: string | null;
}

/** A session as the file reads see it: its log and its length (a read describes the log as of one seq, docs/contract.md#log). */
export interface FilesRef {
  ref: LogRef;
  eventCount: number;
}

/** A path as a client spells it, in its canonical form; BAD_USER_INPUT when it is not a workspace path. */
function canonical(raw: string): string {
  const r = workspacePath(raw);
  if ('problem' in r) throw badInput(r.problem, { path: raw });
  return r.path;
}

/** `seq` when it is an event of a log of `eventCount` events, else SEQ_OUT_OF_RANGE naming `what`. */
export function seqWithin(seq: number, eventCount: number, what = 'atSeq'): number {
  if (!Number.isInteger(seq) || seq < 0 || seq >= eventCount) {
    throw new ForklineError('SEQ_OUT_OF_RANGE', `${what} ${seq} is not an event of this session (0..${eventCount - 1})`, { [what]: seq, eventCount });
  }
  return seq;
}

/** What a door holds change sets to: the session's quota and how many contents a request may name. */
export interface FileDoorLimits extends WorkspaceLimits {
  maxNamedHashes: number;
}

/** A change set's data with the seq it is (or will be) stored at. */
export type SeqChangeSet = { seq: number; data: FilesChangeData };

/** Content hashes an export holds at once to write each content once (recordingBlobs): about 30 MB of strings, half again while it reads. */
export const RECORDING_HASHES_HELD = 250_000;

/** The distinct contents change sets name. */
function namedIn(changeSets: readonly SeqChangeSet[]): Set<string> {
  const named = new Set<string>();
  for (const cs of changeSets) for (const c of cs.data.changes) if (c.hash) named.add(c.hash);
  return named;
}

/**
 * BAD_USER_INPUT for the first change named content that is not in `held`
 * (the tenant does not hold it: the same answer for content another tenant
 * holds), or whose size is not the stored one.
 */
function unheldIn(changeSets: readonly SeqChangeSet[], held: ReadonlyMap<string, number>, where: (seq: number) => string): ForklineError | undefined {
  for (const cs of changeSets) {
    for (const c of cs.data.changes) {
      if (c.hash === null) continue;
      const size = held.get(c.hash);
      if (size === undefined)
        return badInput(`${where(cs.seq)} names file content ${c.hash} for "${c.path}", which it does not carry and this tenant does not hold`, {
          path: c.path,
          hash: c.hash,
        });
      const problem = contentProblem({ path: c.path, hash: c.hash, size: c.size }, { size });
      if (problem) return badInput(`${where(cs.seq)} ${problem}`, { path: c.path });
    }
  }
  return undefined;
}

export class FileBlobs {
  private readonly checkpoints: FileTreeCheckpoints;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    readonly limits: FileDoorLimits = { ...DEFAULT_WORKSPACE_LIMITS, maxNamedHashes: DEFAULT_MAX_NAMED_HASHES },
  ) {
    this.checkpoints = new FileTreeCheckpoints(pool, log);
  }

  /**
   * The sizes of those of `hashes` the tenant holds: contents some session of
   * its own stored. Content only another tenant holds is absent, exactly as
   * content nobody holds (a tenant learns nothing of others' files).
   */
  async heldBy(tenant: string, hashes: readonly string[], db: Db = this.pool): Promise<Map<string, number>> {
    const out = new Map<string, number>();
    for (let i = 0; i < hashes.length; i += BLOB_PAGE) {
      // The tenant's own rows first, then the contents among them: what it costs follows what this tenant holds,
      // never how many sessions of other tenants hold a content, which would tell the two apart by time. The
      // hashes are joined from unnest, not compared as constants, so no plan is chosen by a named hash's
      // frequency in the table (its statistics are every tenant's).
      const { rows } = await db.query<{ hash: string; size: number }>(
        `WITH held AS MATERIALIZED (
           SELECT DISTINCT sb.hash FROM unnest($2::text[]) h(hash) JOIN "SessionBlob" sb ON sb.tenant = $1 AND sb.hash = h.hash
         )
         SELECT b.hash, b.size FROM held JOIN "FileBlob" b ON b.tenant = $1 AND b.hash = held.hash`,
        [tenant, hashes.slice(i, i + BLOB_PAGE)],
      );
      for (const r of rows) out.set(r.hash, r.size);
    }
    return out;
  }

  /**
   * Holds change sets that enter from outside (a recording, a runner's batch)
   * to what forkline's own agent keeps: each names only content the tenant
   * holds (after what the request carries was stored for it), at most
   * `maxNamedHashes` of them besides those it carries, with the content's stored size; and folded onto
   * `tree` (the session's tree before them) none leaves a tree past the
   * session's quota. BAD_USER_INPUT otherwise: the same answer for content
   * held by another tenant and content nobody holds. Returns the named hashes.
   */
  async checkChangeSets(
    tenant: string,
    changeSets: readonly SeqChangeSet[],
    tree: FileTree,
    db: Db | undefined,
    where: (seq: number) => string,
    carried: ReadonlySet<string> = new Set(),
  ): Promise<string[]> {
    const named = [...namedIn(changeSets)];
    const uncarried = named.filter((h) => !carried.has(h)).length;
    if (uncarried > this.limits.maxNamedHashes) throw this.tooManyNamed(uncarried);
    const refused = unheldIn(changeSets, await this.heldBy(tenant, named, db ?? this.pool), where);
    if (refused) throw refused;
    const over = firstOverQuota(tree, changeSets, this.limits);
    if (over) throw badInput(`${where(over.seq)}: ${over.problem}`, { seq: over.seq });
    return named;
  }

  /**
   * Stored change sets that break the path rule every door now holds them to
   * (rows written before it was): at most `limit` of them, with the session,
   * seq and why. A start-up check reports them; a restore refuses them.
   */
  async refusedChangeSets(limit = 1000): Promise<Array<{ sessionId: string; seq: number; problem: string }>> {
    const found: Array<{ sessionId: string; seq: number; problem: string }> = [];
    let after = { sessionId: '', seq: -1 };
    for (;;) {
      const rows = await this.log.storedOfType(FILES_CHANGE, after, BLOB_PAGE);
      for (const r of rows) {
        const parsed = filesChangeDataSchema.safeParse(r.data);
        if (!parsed.success && found.push({ sessionId: r.sessionId, seq: r.seq, problem: parsed.error.issues.map((i) => i.message).join('; ') }) >= limit)
          return found;
      }
      if (rows.length < BLOB_PAGE) return found;
      after = rows[rows.length - 1];
    }
  }

  /** Notes that the session holds these contents too (its change sets name them): deleting another session of its tenant then leaves them to it. */
  async adopt(sessionId: string, hashes: readonly string[], db: Db = this.pool): Promise<void> {
    if (hashes.length === 0) return;
    await db.query(
      `INSERT INTO "SessionBlob" ("sessionId", "treeId", hash, tenant)
       SELECT $1, $3, h, (SELECT tenant FROM "Session" WHERE id = $1 AND "treeId" = $3) FROM unnest($2::text[]) h ON CONFLICT DO NOTHING`,
      [sessionId, hashes, await this.log.treeOf(sessionId, db)],
    );
  }

  /** The tenant of a session, whose copies of contents its reads and writes use; SESSION_NOT_FOUND when it is gone. */
  async tenantOf(ref: LogRef, db: Db = this.pool): Promise<string> {
    const id = typeof ref === 'string' ? ref : ref.sessionId;
    const { rows } = await db.query<{ tenant: string }>('SELECT tenant FROM "Session" WHERE id = $1 AND "treeId" = $2', [id, await this.log.treeOf(ref, db)]);
    if (!rows[0]) throw sessionNotFound(id);
    return rows[0].tenant;
  }

  /**
   * Stores contents a session's call produced, each once in its tenant
   * whatever else of the tenant holds it, and notes that the session stored
   * them — before the change set naming them is appended, so no log ever
   * names a missing blob. (When that append then fails, the blobs stay with
   * the session until it is deleted.) A big content is stored as its chunks
   * (core/file-chunks.ts), each once in the tenant: a new version of a big
   * file adds only the chunks that differ. One statement, so a blob row
   * without content always has its chunk list. What other tenants hold is
   * never looked at: the write costs what it costs for content nobody holds
   * (docs/files.md "Contents are stored once per tenant").
   */
  async put(sessionId: string, blobs: ReadonlyArray<{ hash: string; content: Uint8Array }>, db: Db = this.pool): Promise<void> {
    if (blobs.length === 0) return;
    const unique = [...new Map(blobs.map((b) => [b.hash, b])).values()];
    // Every content (a small blob's, a big one's chunks) goes as one bytea parameter, sent binary, and each row takes
    // its slice (1-based offset): a bytea[] parameter would go as text, each byte as two hex digits, so a batch of
    // contents would become several strings of twice its size on the heap before it was sent.
    const bytes = new Contents();
    const chunks = new Map<string, { size: number; at: number }>();
    const links: { blob: string[]; idx: number[]; chunk: string[] } = { blob: [], idx: [], chunk: [] };
    const at: Array<number | null> = [];
    for (const b of unique) {
      if (!isChunked(b.content.byteLength)) {
        at.push(bytes.add(b.content));
        continue;
      }
      at.push(null);
      chunksOf(b.content).forEach((c, idx) => {
        const hash = sha256(c);
        if (!chunks.has(hash)) chunks.set(hash, { size: c.byteLength, at: bytes.add(c) });
        links.blob.push(b.hash);
        links.idx.push(idx);
        links.chunk.push(hash);
      });
    }
    // The session's tenant, read in the statement (no session: null, which every row refuses).
    const tenant = `(SELECT tenant FROM "Session" WHERE id = $1 AND "treeId" = $11)`;
    await db.query(
      `WITH c AS (
         INSERT INTO "FileChunk" (tenant, hash, size, content)
         SELECT ${tenant}, h, s, substring($7::bytea from a for s) FROM unnest($5::text[], $6::int[], $12::int[]) x(h, s, a) ON CONFLICT (tenant, hash) DO NOTHING
       ), b AS (
         INSERT INTO "FileBlob" (tenant, hash, size, content)
         SELECT ${tenant}, h, s, substring($7::bytea from a for s) FROM unnest($2::text[], $3::int[], $4::int[]) x(h, s, a)
         ON CONFLICT (tenant, hash) DO NOTHING RETURNING hash
       ), l AS (
         INSERT INTO "FileBlobChunk" (tenant, "blobHash", idx, "chunkHash")
         SELECT ${tenant}, bh, i, ch FROM unnest($8::text[], $9::int[], $10::text[]) x(bh, i, ch) WHERE bh IN (SELECT hash FROM b)
       )
       INSERT INTO "SessionBlob" ("sessionId", "treeId", hash, tenant)
       SELECT $1, $11, h, ${tenant} FROM unnest($2::text[]) h ON CONFLICT DO NOTHING`,
      [
        sessionId,
        unique.map((b) => b.hash),
        unique.map((b) => b.content.byteLength),
        at,
        [...chunks.keys()],
        [...chunks.values()].map((c) => c.size),
        bytes.joined(),
        links.blob,
        links.idx,
        links.chunk,
        await this.log.treeOf(sessionId, db),
        [...chunks.values()].map((c) => c.at),
      ],
    );
  }

  /**
   * The tenant's contents by hash (missing hashes are absent from the map), a
   * page of blobs per statement; chunked ones put together. Each is checked
   * against its hash as it is read: a ContentMismatchError, never other bytes
   * under its name.
   */
  async contents(tenant: string, hashes: Iterable<string>, db: Db = this.pool): Promise<Map<string, Buffer>> {
    const all = [...new Set(hashes)];
    const out = new Map<string, Buffer>();
    for (let i = 0; i < all.length; i += BLOB_PAGE) {
      const { rows } = await db.query<{ hash: string; content: Buffer | null }>(
        'SELECT hash, content FROM "FileBlob" WHERE tenant = $1 AND hash = ANY($2::text[])',
        [tenant, all.slice(i, i + BLOB_PAGE)],
      );
      const chunked: string[] = [];
      for (const r of rows) {
        if (r.content) out.set(r.hash, r.content);
        else chunked.push(r.hash);
      }
      if (chunked.length) for (const [hash, content] of await this.assemble(tenant, chunked, db)) out.set(hash, content);
    }
    for (const [hash, content] of out) {
      const found = { hash: sha256(content), size: content.byteLength };
      if (contentProblem({ hash }, found)) throw new ContentMismatchError(hash, found);
    }
    return out;
  }

  /**
   * The sizes of the tenant's stored contents by hash, as Postgres holds them
   * (missing hashes are absent): reads go by these, never by the size a
   * change set claims, which came with the data that wrote it.
   */
  async storedSizes(tenant: string, hashes: Iterable<string>, db: Db = this.pool): Promise<Map<string, number>> {
    const all = [...new Set(hashes)];
    if (all.length === 0) return new Map();
    const { rows } = await db.query<{ hash: string; size: number }>('SELECT hash, size FROM "FileBlob" WHERE tenant = $1 AND hash = ANY($2::text[])', [
      tenant,
      all,
    ]);
    return new Map(rows.map((r) => [r.hash, r.size]));
  }

  /** Chunked blobs' contents: their chunks in order, one statement. */
  private async assemble(tenant: string, hashes: string[], db: Db): Promise<Map<string, Buffer>> {
    const { rows } = await db.query<{ hash: string; content: Buffer }>(
      `SELECT l."blobHash" AS hash, c.content FROM "FileBlobChunk" l JOIN "FileChunk" c ON c.tenant = l.tenant AND c.hash = l."chunkHash"
       WHERE l.tenant = $1 AND l."blobHash" = ANY($2::text[]) ORDER BY l."blobHash", l.idx`,
      [tenant, hashes],
    );
    const parts = new Map<string, Buffer[]>();
    for (const r of rows) (parts.get(r.hash) ?? parts.set(r.hash, []).get(r.hash)!).push(r.content);
    return new Map([...parts].map(([hash, list]) => [hash, Buffer.concat(list)]));
  }

  /** The tree as of `atSeq` (default: the end of the log): change sets whose result lies at or before it, folded from the nearest checkpoint. */
  async tree(ref: LogRef, atSeq?: number, db: Db = this.pool): Promise<FileTree> {
    return this.checkpoints.tree(ref, atSeq, db);
  }

  /** Session.files: the entries under `dir` as of `atSeq` (default: the session's last event). */
  async files(s: FilesRef, opts: { atSeq?: number | null; dir?: string } = {}, db: Db = this.pool): Promise<FileEntry[]> {
    if (s.eventCount === 0) return [];
    const dir = canonical(opts.dir ?? '');
    return listTree(await this.tree(s.ref, seqWithin(opts.atSeq ?? s.eventCount - 1, s.eventCount), db), dir);
  }

  /** Session.file: one file as of `atSeq`, with its content when within FILE_READ_MAX_BYTES; null when there is none. */
  async file(s: FilesRef, path: string, atSeq?: number | null, db: Db = this.pool): Promise<FileContent | null> {
    const at = canonical(path);
    if (s.eventCount === 0) return null;
    const named = (await this.tree(s.ref, seqWithin(atSeq ?? s.eventCount - 1, s.eventCount), db)).get(at);
    if (!named) return null;
    const tenant = await this.tenantOf(s.ref, db);
    const size = (await this.storedSizes(tenant, [named.hash], db)).get(named.hash);
    const entry = size === undefined ? named : { ...named, size };
    if (size === undefined || size > FILE_READ_MAX_BYTES) return { ...entry, text: null, base64: null };
    const bytes = (await this.contents(tenant, [entry.hash], db)).get(entry.hash);
    if (!bytes || bytes.byteLength > FILE_READ_MAX_BYTES) return { ...entry, text: null, base64: null };
    const text = textOf(bytes);
    return { ...entry, text: text ?? null, base64: text === undefined ? bytes.toString('base64') : null };
  }

  /**
   * Session.fileChanges: per path, what differs between the tree as of
   * `fromSeq` (-1: before anything) and as of `toSeq` (default: the last
   * event), with a unified diff for texts.
   */
  async changes(s: FilesRef, fromSeq: number, toSeq?: number | null, db: Db = this.pool): Promise<FileChange[]> {
    if (fromSeq !== -1) seqWithin(fromSeq, s.eventCount, 'fromSeq');
    const to = toSeq ?? s.eventCount - 1;
    if (s.eventCount === 0 && toSeq == null) return [];
    seqWithin(to, s.eventCount, 'toSeq');
    const [before, after] = await Promise.all([fromSeq === -1 ? new Map() : this.tree(s.ref, fromSeq, db), this.tree(s.ref, to, db)]);
    const named = treeChanges(before, after);
    const tenant = await this.tenantOf(s.ref, db);
    // Sizes as stored, not as the change sets claim: what is read and diffed is bounded by what the blobs hold.
    const sizes = await this.storedSizes(
      tenant,
      named.flatMap((c) => [c.before?.hash, c.after?.hash]).filter((h): h is string => !!h),
      db,
    );
    const stored = (e: FileEntry | undefined) => (e && sizes.has(e.hash) ? { ...e, size: sizes.get(e.hash)! } : e);
    const changed = named.map((c) => ({ ...c, before: stored(c.before), after: stored(c.after) }));
    // Diffed while both sides are small and the read's byte budget lasts (in path order).
    let budget = DIFF_REQUEST_MAX_BYTES;
    const diffable = (e: FileEntry | undefined) => !e || (sizes.has(e.hash) && e.size <= DIFF_MAX_BYTES);
    const diffed = changed.map((c) => {
      if (!diffable(c.before) || !diffable(c.after)) return false;
      const bytes = (c.before?.size ?? 0) + (c.after?.size ?? 0);
      if (bytes > budget) return false;
      budget -= bytes;
      return true;
    });
    const blobs = await this.contents(
      tenant,
      changed
        .filter((_, i) => diffed[i])
        .flatMap((c) => [c.before?.hash, c.after?.hash])
        .filter((h): h is string => !!h),
      db,
    );
    const textAt = (e: FileEntry | undefined): string | undefined | null => {
      if (!e) return undefined;
      const bytes = blobs.get(e.hash);
      return bytes ? (textOf(bytes) ?? null) : null;
    };
    // The diffs run side by side, each a step at a time (core/unified-diff.ts), under one deadline for the read.
    const deadline = Date.now() + DIFF_REQUEST_TIMEOUT_MS;
    const diffs = await Promise.all(
      changed.map(async (c, i) => {
        if (!diffed[i]) return null;
        const [a, b] = [textAt(c.before), textAt(c.after)];
        if (a === null || b === null) return null;
        return (await unifiedDiff(c.path, a, b, { timeoutMs: deadline - Date.now() })) ?? null;
      }),
    );
    return changed.map((c, i) => ({ path: c.path, kind: c.kind, before: c.before ?? null, after: c.after ?? null, diff: diffs[i] }));
  }

  /** BAD_USER_INPUT for change sets that name `uncarried` contents without carrying them, past the cap. */
  private tooManyNamed(uncarried: number): ForklineError {
    return badInput(
      `change sets may name at most ${this.limits.maxNamedHashes} distinct file contents per request without carrying them (FORKLINE_MAX_NAMED_FILE_HASHES), these name ${uncarried}`,
      { limit: this.limits.maxNamedHashes },
    );
  }

  /**
   * An imported session's change sets in effect, held to the rules of
   * checkChangeSets, and the contents they name noted as the session's: then
   * deleting the session it was exported from does not take them from it.
   * What the recording carries is what it already stored (its SessionBlob
   * rows). A page of change sets at a time (session-log.ts
   * `fileChangeSetPages`), each page's contents checked and adopted in a
   * statement or two: a history naming millions of contents is never held
   * whole. The answer is checkChangeSets's: the count of uncarried contents
   * first (kept in a set while within the cap, then in a temporary table of
   * the import's transaction, which `db` must be), then the first change set
   * naming content the tenant does not hold, then the first past the quota.
   */
  async adoptNamed(tenant: string, sessionId: string, db: Db, where: (seq: number) => string, page: ChangeSetPage = CHANGE_SET_PAGE): Promise<void> {
    const treeId = await this.log.treeOf(sessionId, db);
    const uncarried = new Set<string>();
    let counted: 'set' | 'table' = 'set';
    let refused: ForklineError | undefined;
    let over: { seq: number; problem: string } | undefined;
    const tree: FileTree = new Map();
    for await (const changeSets of this.log.fileChangeSetPages(sessionId, undefined, page, db)) {
      const named = [...namedIn(changeSets)];
      // What the session stored is its tenant's, at its stored size: only the rest asks heldBy (which reads every
      // session of the tenant holding each content, and took seconds per statement inside a big import).
      const { rows: carriedRows } = await db.query<{ hash: string; size: number }>(
        `SELECT b.hash, b.size FROM "SessionBlob" sb JOIN "FileBlob" b ON b.tenant = sb.tenant AND b.hash = sb.hash
          WHERE sb."sessionId" = $1 AND sb."treeId" = $2 AND sb.hash = ANY($3::text[])`,
        [sessionId, treeId, named],
      );
      const carried = new Map(carriedRows.map((r) => [r.hash, r.size]));
      const fresh = named.filter((h) => !carried.has(h));
      if (counted === 'set') for (const h of fresh) uncarried.add(h);
      if (counted === 'set' && uncarried.size > this.limits.maxNamedHashes) {
        counted = 'table';
        await db.query('CREATE TEMPORARY TABLE forkline_named_hashes (hash text PRIMARY KEY) ON COMMIT DROP');
        await db.query('INSERT INTO forkline_named_hashes SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [[...uncarried]]);
        uncarried.clear();
      } else if (counted === 'table') {
        await db.query('INSERT INTO forkline_named_hashes SELECT unnest($1::text[]) ON CONFLICT DO NOTHING', [fresh]);
      }
      // Past the cap the answer is the count: the rest is only counted.
      if (counted === 'table' || refused) continue;
      const held = await this.heldBy(tenant, fresh, db);
      for (const [hash, size] of carried) held.set(hash, size);
      refused = unheldIn(changeSets, held, where);
      over ??= firstOverQuota(tree, changeSets, this.limits);
      if (!refused && !over) await this.adopt(sessionId, named, db);
    }
    if (counted === 'table') {
      const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM forkline_named_hashes');
      throw this.tooManyNamed(Number(rows[0].n));
    }
    if (refused) throw refused;
    if (over) throw badInput(`${where(over.seq)}: ${over.problem}`, { seq: over.seq });
  }

  /**
   * The contents the change sets in effect through `toSeq` name, for a
   * recording, in hash order, each once: a page of blobs per statement, each
   * page at most `pageBytes` (or one blob larger than that) as Postgres
   * stores their sizes. A history names every version a file had, each up to
   * the file limit: 500 of them in a page held gigabytes while an export
   * waited on its client. The change sets are read a page at a time, and at
   * most `maxHashes` names are kept: a history naming more is read again for
   * each next `maxHashes` of them (in hash order), rather than held whole.
   */
  async *recordingBlobs(
    ref: LogRef,
    toSeq: number,
    pageBytes = CONTENT_PAGE_BYTES,
    db: Db = this.pool,
    opts: { maxHashes?: number; page?: ChangeSetPage } = {},
  ): AsyncGenerator<RecordingBlob> {
    if (toSeq < 0) return;
    const tenant = await this.tenantOf(ref, db);
    const max = opts.maxHashes ?? RECORDING_HASHES_HELD;
    for (let after = ''; ;) {
      // The smallest `max` hashes past `after`; `bound`: the least hash left for a later pass.
      let found = new Set<string>();
      let bound: string | undefined;
      const keepSmallest = () => {
        const sorted = [...found].sort();
        if (sorted.length > max) bound = sorted[max];
        found = new Set(sorted.slice(0, max));
        return sorted.slice(0, max);
      };
      for await (const changeSets of this.log.fileChangeSetPages(ref, toSeq, opts.page ?? CHANGE_SET_PAGE, db)) {
        for (const h of namedIn(changeSets)) if (h > after && (bound === undefined || h < bound)) found.add(h);
        if (found.size > max + (max >> 1)) keepSmallest();
      }
      const hashes = keepSmallest();
      yield* this.blobsOf(tenant, hashes, pageBytes, db);
      if (bound === undefined) return;
      after = hashes[hashes.length - 1];
    }
  }

  /** The tenant's stored contents of `hashes` (those stored), in their order, read in pages of at most `pageBytes`. */
  private async *blobsOf(tenant: string, hashes: readonly string[], pageBytes: number, db: Db): AsyncGenerator<RecordingBlob> {
    for (let i = 0; i < hashes.length; i += BLOB_PAGE) {
      const sizes = await this.storedSizes(tenant, hashes.slice(i, i + BLOB_PAGE), db);
      const stored = hashes.slice(i, i + BLOB_PAGE).flatMap((h) => {
        const bytes = sizes.get(h);
        return bytes === undefined ? [] : [{ item: h, bytes }];
      });
      for (const p of groupsBySize(stored, pageBytes)) {
        const contents = await this.contents(tenant, p, db);
        for (const h of p) {
          const content = contents.get(h);
          if (content) yield { blob: h, base64: content.toString('base64') };
        }
      }
    }
  }

  /** Stores contents an imported recording carries, each checked against its hash. */
  async putFromRecording(sessionId: string, blobs: readonly RecordingBlob[], db: Db): Promise<void> {
    const checked = blobs.map((b) => {
      const content = Buffer.from(b.base64, 'base64');
      const problem = contentProblem({ hash: b.blob }, { hash: sha256(content), size: content.byteLength });
      if (problem) throw badInput(problem);
      return { hash: b.blob, content };
    });
    await this.put(sessionId, checked, db);
  }

  /** The blobs the given sessions stored (deletion checks these afterwards). */
  async storedBy(sessionIds: readonly string[], treeId: string, db: Db): Promise<string[]> {
    const { rows } = await db.query<{ hash: string }>('SELECT DISTINCT hash FROM "SessionBlob" WHERE "sessionId" = ANY($1::text[]) AND "treeId" = $2', [
      sessionIds,
      treeId,
    ]);
    return rows.map((r) => r.hash);
  }

  /**
   * Deletes the tenant's copies of those of `hashes` no session of the tenant
   * stores any more (after the sessions that stored them were deleted), then
   * the tenant's chunks of theirs no remaining blob of the tenant holds.
   * Other tenants' copies are theirs: never looked at. A blob another session
   * stores meanwhile is kept: its SessionBlob row's foreign key refuses the
   * delete, and the blob waits for the next deletion that names it (a chunk
   * likewise, by FileBlobChunk's).
   */
  async deleteUnreferenced(tenant: string, hashes: readonly string[]): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < hashes.length; i += BLOB_PAGE) {
      const page = hashes.slice(i, i + BLOB_PAGE);
      const { rows: chunkRows } = await this.pool.query<{ hash: string }>(
        'SELECT DISTINCT "chunkHash" AS hash FROM "FileBlobChunk" WHERE tenant = $2 AND "blobHash" = ANY($1::text[])',
        [page, tenant],
      );
      deleted += await this.deleteRefused(
        `DELETE FROM "FileBlob" b WHERE b.tenant = $2 AND b.hash = ANY($1::text[])
           AND NOT EXISTS (SELECT 1 FROM "SessionBlob" r WHERE r.tenant = b.tenant AND r.hash = b.hash)`,
        page,
        tenant,
      );
      if (chunkRows.length) {
        await this.deleteRefused(
          `DELETE FROM "FileChunk" c WHERE c.tenant = $2 AND c.hash = ANY($1::text[])
             AND NOT EXISTS (SELECT 1 FROM "FileBlobChunk" l WHERE l.tenant = c.tenant AND l."chunkHash" = c.hash)`,
          chunkRows.map((r) => r.hash),
          tenant,
        );
      }
    }
    return deleted;
  }

  /** Runs a delete that a foreign key may refuse (something came to hold the row meanwhile: it stays). */
  private async deleteRefused(sql: string, hashes: string[], tenant: string): Promise<number> {
    try {
      return (await this.pool.query(sql, [hashes, tenant])).rowCount ?? 0;
    } catch (err) {
      if ((err as { code?: string }).code !== '23503') throw err;
      return 0;
    }
  }
}
