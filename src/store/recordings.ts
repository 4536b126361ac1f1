// Recordings in and out of Postgres (docs/contract.md#formats). Export streams the log in
// pages; import validates each line as it streams the events into Postgres,
// in one transaction that an invalid line rolls back.
import type pg from 'pg';
import { closersFor } from '../core/repair.ts';
import {
  RecordingValidator,
  exportLines,
  recordingHeader,
  recordingLines,
  upgradeToV4,
  lineOfSeq,
  type RecordingBlob,
  type RecordingSummary,
} from '../core/recording.ts';
import { CURRENT_FORMAT_VERSION } from '../core/events.ts';
import type { BeforeCommit, Scope, SessionRow, SessionStore } from './session-store.ts';
import type { TenantStore } from './tenant-store.ts';
import { SESSIONS_CHANNEL } from './channels.ts';
import { newSessionId } from './ids.ts';
import { SESSION_TREE_INSERT } from './session-trees.ts';
import { copyJsonText, copyRows, copyText } from './copy-in.ts';
import type { ChangeSetPage } from './session-log.ts';

/** A recording's text, or a way to read it from the start as text or bytes. */
export type RecordingSource = string | (() => AsyncIterable<string | Uint8Array>);

/** File contents are written this many at a time, or as soon as they hold this many bytes of base64 (one line can hold 16 MiB). */
export const BLOB_BATCH_SIZE = 100;
export const BLOB_BATCH_BYTES = 4 * 1024 * 1024;

/**
 * The session as recording lines (format V4), newline-terminated, read page by
 * page as they are consumed, and the row they describe (its eventCount: the
 * number of event lines, for progress).
 */
export async function exportRecording(store: TenantStore, sessionId: string) {
  const session = await store.requireSession(sessionId);
  return { session, lines: recordingLinesOf(store, session) };
}

/**
 * The recording of the log as of a session row (its title, its eventCount): a
 * live session keeps appending, the export is the log the row describes.
 */
function recordingLinesOf(store: TenantStore, session: Pick<SessionRow, 'id' | 'title' | 'eventCount' | 'runner'>): AsyncGenerator<string> {
  // Then the file contents its change sets name (the tree at any of its events can be read after import).
  const endSeq = session.eventCount;
  return exportLines(recordingHeader(session), store.log.stream(session.id, { endSeq }), () => store.files.recordingBlobs(session.id, endSeq - 1));
}

/**
 * recordingLinesOf as one string (Session.recording: the same snapshot as the
 * row's other fields), or, once it passes `maxBytes`, how far it got: a
 * recording imported through POST /recordings may be gigabytes, and is not
 * built whole to be refused.
 */
export async function recordingText(
  store: TenantStore,
  session: Pick<SessionRow, 'id' | 'title' | 'eventCount' | 'runner'>,
  maxBytes = Infinity,
): Promise<{ text: string } | { overBytes: number }> {
  let text = '';
  let bytes = 0;
  for await (const line of recordingLinesOf(store, session)) {
    bytes += Buffer.byteLength(line);
    if (bytes > maxBytes) return { overBytes: bytes };
    text += line;
  }
  return { text };
}

/** What one import may take (POST /recordings passes its own; other doors the defaults), and its cancel. */
export interface ImportLimits {
  /** Default MAX_RECORDING_BYTES and MAX_RECORDING_LINE_BYTES. */
  maxBytes?: number;
  maxLineBytes?: number;
  /** Default MAX_RECORDING_CONTENTS: distinct file contents its change sets may name. */
  maxContents?: number;
  /** Aborted (the uploader went): the import stops and its transaction rolls back, up to its commit. */
  signal?: AbortSignal;
}

/**
 * Imports a recording as a new session of the caller's tenant (format V4, new
 * id, no parent), in one pass and one transaction: each line is validated as
 * it is read and its event streamed into Postgres with COPY, so memory stays
 * at one line and one chunk whatever the size. A line that breaks a rule
 * throws, and the transaction rolls back: an invalid recording writes
 * nothing. The session's counters are written once the whole log is checked.
 * A log ending inside an open turn gets its `interrupted` closers here, in
 * the same transaction (docs/contract.md#repair, docs/contract.md#formats), so recovery finds nothing to repair.
 */
export async function importRecording(
  store: SessionStore,
  scope: Scope,
  source: RecordingSource,
  opts: ImportLimits & {
    beforeCommit?: BeforeCommit<{ sessionId: string }>;
    /**
     * First in the transaction, before the recording is read: an idempotency key's claim (IdempotencyStore.claim),
     * which waits for another process importing under the same key and throws to answer with its session instead.
     */
    claim?: (client: pg.PoolClient) => Promise<void>;
    /** Change sets read per page when the named contents are checked and adopted (default CHANGE_SET_PAGE). */
    changeSetPage?: ChangeSetPage;
  } = {},
): Promise<SessionRow> {
  const check = new RecordingValidator({ maxContents: opts.maxContents });
  const id = newSessionId();
  await store.transaction(
    async (client) => {
      await opts.claim?.(client);
      // Opened once the key is claimed: a claim answered by another import's session reads nothing of this one.
      const lines = recordingLines(typeof source === 'string' ? source : source(), opts.maxBytes, opts.maxLineBytes)[Symbol.asyncIterator]();
      // The row first (events reference it; it references its directory entry: an imported session is its own tree);
      // an event without createdAt gets the transaction's time, as an append does.
      await client.query(SESSION_TREE_INSERT, [id, id]);
      store.trees.remember(id, id);
      const now = (
        await client.query<{ now: string }>(
          `INSERT INTO "Session" (id, tenant, "treeId", "formatVersion") VALUES ($1, $2, $1, $3) RETURNING now()::text AS now`,
          [id, scope.tenant, CURRENT_FORMAT_VERSION],
        )
      ).rows[0].now;
      let blobs: RecordingBlob[] = [];
      let blobBytes = 0;
      // The event lines, up to the first file content (the validator holds those to come after every event).
      async function* eventRows(): AsyncGenerator<string> {
        for (let next = await lines.next(); !next.done; next = await lines.next()) {
          opts.signal?.throwIfAborted();
          const pushed = check.push(next.value);
          if (check.blob) {
            blobs.push(check.blob);
            blobBytes = check.blob.base64.length;
            return;
          }
          if (!pushed) continue;
          const e = check.header!.version < CURRENT_FORMAT_VERSION ? upgradeToV4(pushed) : pushed;
          const json = JSON.stringify(e.data);
          // dataBytes: the JSON text's bytes (about its jsonb's, which the other writers store).
          yield `${id}\t${e.seq}\t${id}\t${copyText(e.type)}\t${copyJsonText(json)}\t${e.synthetic ? 't' : 'f'}\t${check.pendingInputCount}\t${e.createdAt ?? now}\t${Buffer.byteLength(json)}\t${copyText(scope.tenant)}`;
        }
      }
      await copyRows(client, `"Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "createdAt", "dataBytes", tenant)`, eventRows());
      for (let next = await lines.next(); !next.done; next = await lines.next()) {
        opts.signal?.throwIfAborted();
        check.push(next.value);
        if (check.blob) {
          blobs.push(check.blob);
          blobBytes += check.blob.base64.length;
        }
        if (blobs.length >= BLOB_BATCH_SIZE || blobBytes >= BLOB_BATCH_BYTES) {
          await store.files.putFromRecording(id, blobs, client);
          blobs = [];
          blobBytes = 0;
        }
      }
      const summary = check.finish();
      await store.files.putFromRecording(id, blobs, client);
      await writeSummary(client, id, summary);
      // What the recording carries is stored for the session by now: the cap on naming contents counts only the others.
      await store.files.adoptNamed(scope.tenant, id, client, (seq) => `line ${lineOfSeq(seq)}: the change set at seq ${seq}`, opts.changeSetPage);
      if (summary.openTurn) {
        // Folded by byte-bounded pages: a recording's open turn of many large events is never held whole.
        const { open } = await store.log.openTailFolded(id, summary.eventCount - 1, client);
        // A call awaiting approval stays pending (docs/contract.md#crash-recovery): maybe nothing to close.
        const closers = closersFor(open, { kind: 'interrupted', sessionId: id }, store.effectOf);
        if (closers.length > 0) await store.append(id, closers, { client });
      }
      await store.notify(SESSIONS_CHANNEL, id, client);
      await opts.beforeCommit?.(client, { sessionId: id });
      opts.signal?.throwIfAborted();
    },
    undefined,
    'long',
  ); // a recording of a long log
  return store.requireSession(scope, id);
}

/**
 * The session's title, status, counters and runner pool, as the validated log says.
 * Stamped changed as the import ends, not as its transaction began (a big one runs for
 * minutes): sessions(changedSince:) must not pass it by before it commits.
 */
function writeSummary(client: pg.PoolClient, id: string, s: RecordingSummary) {
  return client.query(
    `UPDATE "Session" SET title = $2, status = $3, "eventCount" = $4, "turnCount" = $5, "pendingInputCount" = $6,
                          "forkedAtSeq" = $7, "inheritedEventCount" = $8, "firstLiveSeq" = $9, runner = $10,
                          "lastTurnFailed" = $11, "modelProvider" = $12, "modelName" = $13, "pendingInputBytes" = $14,
                          "updatedAt" = clock_timestamp()
      WHERE id = $1 AND "treeId" = $1`,
    [
      id,
      s.header.session.title ?? s.lastTitle ?? null,
      s.waiting ? 'WAITING' : s.openTurn ? 'RUNNING' : 'IDLE',
      s.eventCount,
      s.turnCount,
      s.pendingInputs,
      s.fork?.forkedAtSeq ?? null,
      s.fork?.inheritedEventCount ?? 0,
      s.fork?.firstLiveSeq ?? 0,
      s.header.session.runner ?? null,
      s.lastTurnFailed,
      s.model?.provider ?? null,
      s.model?.model ?? null,
      s.pendingInputBytes,
    ],
  );
}
