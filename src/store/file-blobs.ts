// Session file workspaces in Postgres: file contents stored once by
// sha-256 (FileBlob, deduplicated across every session), which session stored
// which blob (SessionBlob: deletion removes the blobs no remaining session
// stored), and the reads that need no agent: the tree as of a seq, one file,
// and what changed between two seqs. The tree itself is the fold of the log's
// change sets (core/file-tree.ts; store/session-log.ts `fileChangeSets`),
// from the nearest checkpoint (store/file-tree-checkpoints.ts).
import { createHash } from 'node:crypto';
import type pg from 'pg';
import { badInput, ForklineError } from '../core/errors.ts';
import { listTree, textOf, treeChanges, workspacePath, type FileEntry, type FileTree, type FileChangeKind } from '../core/file-tree.ts';
import { unifiedDiff } from '../core/unified-diff.ts';
import { chunksOf, isChunked } from '../core/file-chunks.ts';
import type { RecordingBlob } from '../core/recording.ts';
import { FileTreeCheckpoints } from './file-tree-checkpoints.ts';
import type { Db, LogRef, SessionLog } from './session-log.ts';

export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

/** Session.file hands back contents up to this size (a bigger file: its entry, no content). */
export const FILE_READ_MAX_BYTES = 1024 * 1024;
/** Session.fileChanges diffs texts up to this size per side. */
export const DIFF_MAX_BYTES = 256 * 1024;
/** Blobs read per statement when a tree is materialised. */
const BLOB_PAGE = 500;

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
  /** A unified diff when both sides are text within DIFF_MAX_BYTES; null otherwise. */
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

export class FileBlobs {
  private readonly checkpoints: FileTreeCheckpoints;

  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
  ) {
    this.checkpoints = new FileTreeCheckpoints(pool, log);
  }

  /**
   * Stores contents a session's call produced, each once whatever else holds
   * it, and notes that the session stored them — before the change set naming
   * them is appended, so no log ever names a missing blob. (When that append
   * then fails, the blobs stay with the session until it is deleted.) A big
   * content is stored as its chunks (core/file-chunks.ts), each once: a new
   * version of a big file adds only the chunks that differ. One statement, so
   * a blob row without content always has its chunk list.
   */
  async put(sessionId: string, blobs: ReadonlyArray<{ hash: string; content: Uint8Array }>, db: Db = this.pool): Promise<void> {
    if (blobs.length === 0) return;
    const unique = [...new Map(blobs.map((b) => [b.hash, b])).values()];
    const chunks = new Map<string, Buffer>();
    const links: { blob: string[]; idx: number[]; chunk: string[] } = { blob: [], idx: [], chunk: [] };
    for (const b of unique) {
      if (!isChunked(b.content.byteLength)) continue;
      chunksOf(b.content).forEach((c, idx) => {
        const hash = sha256(c);
        if (!chunks.has(hash)) chunks.set(hash, Buffer.from(c));
        links.blob.push(b.hash);
        links.idx.push(idx);
        links.chunk.push(hash);
      });
    }
    await db.query(
      `WITH c AS (
         INSERT INTO "FileChunk" (hash, size, content)
         SELECT * FROM unnest($5::text[], $6::int[], $7::bytea[]) ON CONFLICT (hash) DO NOTHING
       ), b AS (
         INSERT INTO "FileBlob" (hash, size, content)
         SELECT * FROM unnest($2::text[], $3::int[], $4::bytea[]) ON CONFLICT (hash) DO NOTHING RETURNING hash
       ), l AS (
         INSERT INTO "FileBlobChunk" ("blobHash", idx, "chunkHash")
         SELECT bh, i, ch FROM unnest($8::text[], $9::int[], $10::text[]) x(bh, i, ch) WHERE bh IN (SELECT hash FROM b)
       )
       INSERT INTO "SessionBlob" ("sessionId", "treeId", hash) SELECT $1, $11, h FROM unnest($2::text[]) h ON CONFLICT DO NOTHING`,
      [
        sessionId,
        unique.map((b) => b.hash),
        unique.map((b) => b.content.byteLength),
        unique.map((b) => (isChunked(b.content.byteLength) ? null : Buffer.from(b.content))),
        [...chunks.keys()],
        [...chunks.values()].map((c) => c.byteLength),
        [...chunks.values()],
        links.blob,
        links.idx,
        links.chunk,
        await this.log.treeOf(sessionId, db),
      ],
    );
  }

  /** Contents by hash (missing hashes are absent from the map), a page of blobs per statement; chunked ones put together. */
  async contents(hashes: Iterable<string>, db: Db = this.pool): Promise<Map<string, Buffer>> {
    const all = [...new Set(hashes)];
    const out = new Map<string, Buffer>();
    for (let i = 0; i < all.length; i += BLOB_PAGE) {
      const { rows } = await db.query<{ hash: string; content: Buffer | null }>('SELECT hash, content FROM "FileBlob" WHERE hash = ANY($1::text[])', [all.slice(i, i + BLOB_PAGE)]);
      const chunked: string[] = [];
      for (const r of rows) {
        if (r.content) out.set(r.hash, r.content);
        else chunked.push(r.hash);
      }
      if (chunked.length) for (const [hash, content] of await this.assemble(chunked, db)) out.set(hash, content);
    }
    return out;
  }

  /** Chunked blobs' contents: their chunks in order, one statement. */
  private async assemble(hashes: string[], db: Db): Promise<Map<string, Buffer>> {
    const { rows } = await db.query<{ hash: string; content: Buffer }>(
      `SELECT l."blobHash" AS hash, c.content FROM "FileBlobChunk" l JOIN "FileChunk" c ON c.hash = l."chunkHash"
       WHERE l."blobHash" = ANY($1::text[]) ORDER BY l."blobHash", l.idx`,
      [hashes],
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
  async files(s: FilesRef, opts: { atSeq?: number | null; dir?: string } = {}): Promise<FileEntry[]> {
    if (s.eventCount === 0) return [];
    const dir = canonical(opts.dir ?? '');
    return listTree(await this.tree(s.ref, seqWithin(opts.atSeq ?? s.eventCount - 1, s.eventCount)), dir);
  }

  /** Session.file: one file as of `atSeq`, with its content when within FILE_READ_MAX_BYTES; null when there is none. */
  async file(s: FilesRef, path: string, atSeq?: number | null): Promise<FileContent | null> {
    const at = canonical(path);
    if (s.eventCount === 0) return null;
    const entry = (await this.tree(s.ref, seqWithin(atSeq ?? s.eventCount - 1, s.eventCount))).get(at);
    if (!entry) return null;
    if (entry.size > FILE_READ_MAX_BYTES) return { ...entry, text: null, base64: null };
    const bytes = (await this.contents([entry.hash])).get(entry.hash);
    if (!bytes) return { ...entry, text: null, base64: null };
    const text = textOf(bytes);
    return { ...entry, text: text ?? null, base64: text === undefined ? bytes.toString('base64') : null };
  }

  /**
   * Session.fileChanges: per path, what differs between the tree as of
   * `fromSeq` (-1: before anything) and as of `toSeq` (default: the last
   * event), with a unified diff for texts.
   */
  async changes(s: FilesRef, fromSeq: number, toSeq?: number | null): Promise<FileChange[]> {
    if (fromSeq !== -1) seqWithin(fromSeq, s.eventCount, 'fromSeq');
    const to = toSeq ?? s.eventCount - 1;
    if (s.eventCount === 0 && toSeq == null) return [];
    seqWithin(to, s.eventCount, 'toSeq');
    const [before, after] = await Promise.all([fromSeq === -1 ? new Map() : this.tree(s.ref, fromSeq), this.tree(s.ref, to)]);
    const changed = treeChanges(before, after);
    const diffable = (e: FileEntry | undefined) => !e || e.size <= DIFF_MAX_BYTES;
    const wanted = changed.filter((c) => diffable(c.before) && diffable(c.after)).flatMap((c) => [c.before?.hash, c.after?.hash]).filter((h): h is string => !!h);
    const blobs = await this.contents(wanted);
    const textAt = (e: FileEntry | undefined): string | undefined | null => {
      if (!e) return undefined;
      const bytes = blobs.get(e.hash);
      return bytes ? (textOf(bytes) ?? null) : null;
    };
    return changed.map((c) => {
      const [a, b] = diffable(c.before) && diffable(c.after) ? [textAt(c.before), textAt(c.after)] : [null, null];
      return { path: c.path, kind: c.kind, before: c.before ?? null, after: c.after ?? null, diff: a === null || b === null ? null : unifiedDiff(c.path, a, b) };
    });
  }

  /**
   * An imported session stores the contents its change sets in effect name
   * (carried by the recording, or already held: then deleting the session it
   * was exported from does not take them from it). A content neither carried
   * nor held refuses the import: its files could not be read.
   */
  async adoptNamed(sessionId: string, db: Db): Promise<void> {
    const changeSets = await this.log.fileChangeSets(sessionId, undefined, db);
    const named = [...new Set(changeSets.flatMap((c) => c.data.changes.map((ch) => ch.hash)).filter((h): h is string => !!h))];
    if (named.length === 0) return;
    const { rows } = await db.query<{ hash: string; held: boolean }>(
      `WITH n AS (SELECT h AS hash, EXISTS (SELECT 1 FROM "FileBlob" b WHERE b.hash = h) AS held FROM unnest($2::text[]) h),
            adopted AS (INSERT INTO "SessionBlob" ("sessionId", "treeId", hash) SELECT $1, $3, hash FROM n WHERE held ON CONFLICT DO NOTHING)
       SELECT hash, held FROM n WHERE NOT held LIMIT 1`,
      [sessionId, named, await this.log.treeOf(sessionId, db)],
    );
    if (rows[0]) throw badInput(`the recording names file content ${rows[0].hash} but does not carry it`);
  }

  /** The contents the change sets in effect through `toSeq` name, for a recording (a page of blobs per statement). */
  async *recordingBlobs(ref: LogRef, toSeq: number): AsyncGenerator<RecordingBlob> {
    if (toSeq < 0) return;
    const hashes = [...new Set((await this.log.fileChangeSets(ref, toSeq)).flatMap((c) => c.data.changes.map((ch) => ch.hash)).filter((h): h is string => !!h))].sort();
    for (let i = 0; i < hashes.length; i += BLOB_PAGE) {
      const contents = await this.contents(hashes.slice(i, i + BLOB_PAGE));
      for (const h of hashes.slice(i, i + BLOB_PAGE)) {
        const bytes = contents.get(h);
        if (bytes) yield { blob: h, base64: bytes.toString('base64') };
      }
    }
  }

  /** Stores contents an imported recording carries, each checked against its hash. */
  async putFromRecording(sessionId: string, blobs: readonly RecordingBlob[], db: Db): Promise<void> {
    const checked = blobs.map((b) => {
      const content = Buffer.from(b.base64, 'base64');
      if (sha256(content) !== b.blob) throw badInput(`file content ${b.blob} does not match its hash`);
      return { hash: b.blob, content };
    });
    await this.put(sessionId, checked, db);
  }

  /** The blobs the given sessions stored (deletion checks these afterwards). */
  async storedBy(sessionIds: readonly string[], treeId: string, db: Db): Promise<string[]> {
    const { rows } = await db.query<{ hash: string }>('SELECT DISTINCT hash FROM "SessionBlob" WHERE "sessionId" = ANY($1::text[]) AND "treeId" = $2', [sessionIds, treeId]);
    return rows.map((r) => r.hash);
  }

  /**
   * Deletes those of `hashes` no session stores any more (after the sessions
   * that stored them were deleted), then the chunks of theirs no remaining
   * blob holds. A blob another session stores meanwhile is kept: its
   * SessionBlob row's foreign key refuses the delete, and the blob waits for
   * the next deletion that names it (a chunk likewise, by FileBlobChunk's).
   */
  async deleteUnreferenced(hashes: readonly string[]): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < hashes.length; i += BLOB_PAGE) {
      const page = hashes.slice(i, i + BLOB_PAGE);
      const { rows: chunkRows } = await this.pool.query<{ hash: string }>('SELECT DISTINCT "chunkHash" AS hash FROM "FileBlobChunk" WHERE "blobHash" = ANY($1::text[])', [page]);
      deleted += await this.deleteRefused(
        `DELETE FROM "FileBlob" b WHERE b.hash = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM "SessionBlob" r WHERE r.hash = b.hash)`,
        page,
      );
      if (chunkRows.length) {
        await this.deleteRefused(
          `DELETE FROM "FileChunk" c WHERE c.hash = ANY($1::text[]) AND NOT EXISTS (SELECT 1 FROM "FileBlobChunk" l WHERE l."chunkHash" = c.hash)`,
          chunkRows.map((r) => r.hash),
        );
      }
    }
    return deleted;
  }

  /** Runs a delete that a foreign key may refuse (something came to hold the row meanwhile: it stays). */
  private async deleteRefused(sql: string, hashes: string[]): Promise<number> {
    try {
      return (await this.pool.query(sql, [hashes])).rowCount ?? 0;
    } catch (err) {
      if ((err as { code?: string }).code !== '23503') throw err;
      return 0;
    }
  }
}
