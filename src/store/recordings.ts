// Recordings in and out of Postgres (DESIGN §5). Export streams the log in
// pages; import validates the whole recording before it writes anything, then
// writes the session in one transaction, in batches.
import type pg from 'pg';
import { closeOpenTail } from '../core/repair.ts';
import { badInput } from '../core/errors.ts';
import {
  RecordingValidator,
  exportLines,
  recordingHeader,
  recordingLines,
  upgradeToV4,
  type RecordingBlob,
  type RecordingEvent,
  type RecordingSummary,
} from '../core/recording.ts';
import { CURRENT_FORMAT_VERSION } from '../core/events.ts';
import type { BeforeCommit, Scope, SessionRow, SessionStore } from './session-store.ts';
import { SESSIONS_CHANNEL } from './channels.ts';
import { newSessionId } from './ids.ts';

/** A recording's text, or a way to read it from the start as text or bytes (import reads it twice). */
export type RecordingSource = string | (() => AsyncIterable<string | Uint8Array>);

export const IMPORT_BATCH_SIZE = 1000;

/**
 * The session as recording lines (format V4), newline-terminated, read page by
 * page as they are consumed, and the row they describe (its eventCount: the
 * number of event lines, for progress).
 */
export async function exportRecording(store: SessionStore, scope: Scope, sessionId: string) {
  const session = await store.requireSession(scope, sessionId);
  return { session, lines: recordingLinesOf(store, session) };
}

/**
 * The recording of the log as of a session row (its title, its eventCount): a
 * live session keeps appending, the export is the log the row describes.
 */
function recordingLinesOf(store: SessionStore, session: Pick<SessionRow, 'id' | 'title' | 'eventCount'>): AsyncGenerator<string> {
  // Then the file contents its change sets name (the tree at any of its events can be read after import).
  const endSeq = session.eventCount;
  return exportLines(recordingHeader(session), store.log.stream(session.id, { endSeq }), () => store.files.recordingBlobs(session.id, endSeq - 1));
}

/** recordingLinesOf as one string (Session.recording: the same snapshot as the row's other fields). */
export async function recordingText(store: SessionStore, session: Pick<SessionRow, 'id' | 'title' | 'eventCount'>): Promise<string> {
  let text = '';
  for await (const line of recordingLinesOf(store, session)) text += line;
  return text;
}

/**
 * Imports a recording as a new session of the caller's tenant (format V4, new
 * id, no parent). Pass 1 validates every line and writes nothing; pass 2
 * validates again while it writes, so a source that changed in between rolls
 * back. A log ending inside an open turn gets its `interrupted` closers here,
 * in the same transaction (DESIGN §2, §5), so recovery finds nothing to repair.
 */
export async function importRecording(
  store: SessionStore,
  scope: Scope,
  source: RecordingSource,
  opts: { beforeCommit?: BeforeCommit<{ sessionId: string }>; /** Default MAX_RECORDING_BYTES (POST /recordings passes its own limit). */ maxBytes?: number } = {},
): Promise<SessionRow> {
  const read = () => recordingLines(typeof source === 'string' ? source : source(), opts.maxBytes);
  const check = new RecordingValidator();
  for await (const line of read()) check.push(line);
  const summary = check.finish();

  const id = newSessionId();
  await store.transaction(async (client) => {
    await insertSession(client, id, scope, summary);
    const replay = new RecordingValidator();
    let batch: Array<RecordingEvent & { pendingInputCount: number }> = [];
    let blobs: RecordingBlob[] = [];
    for await (const line of read()) {
      const e = replay.push(line);
      if (replay.blob) blobs.push(replay.blob);
      if (blobs.length >= IMPORT_BATCH_SIZE / 10) {
        await store.files.putFromRecording(id, blobs, client);
        blobs = [];
      }
      if (e) batch.push({ ...(summary.header.version < CURRENT_FORMAT_VERSION ? upgradeToV4(e) : e), pendingInputCount: replay.pendingInputCount });
      if (batch.length >= IMPORT_BATCH_SIZE) {
        await insertEvents(client, id, batch);
        batch = [];
      }
    }
    await insertEvents(client, id, batch);
    if (JSON.stringify(replay.finish()) !== JSON.stringify(summary)) throw badInput('the recording changed while it was being imported');
    await store.files.putFromRecording(id, blobs, client);
    await store.files.adoptNamed(id, client);
    if (summary.openTurn) {
      const tail = await store.log.openTail(id, summary.eventCount - 1, client);
      await store.append(id, closeOpenTail(tail.events, { kind: 'interrupted', sessionId: id }, store.effectOf), { client });
    }
    await store.notify(SESSIONS_CHANNEL, id, client);
    await opts.beforeCommit?.(client, { sessionId: id });
  });
  return store.requireSession(scope, id);
}

function insertSession(client: pg.PoolClient, id: string, scope: Scope, s: RecordingSummary) {
  return client.query(
    `INSERT INTO "Session" (id, tenant, "treeId", title, status, "formatVersion", "eventCount", "turnCount", "pendingInputCount",
                            "parentId", "forkedAtSeq", "inheritedEventCount", "firstLiveSeq")
     VALUES ($1, $2, $1, $3, $4, $11, $5, $6, $7, NULL, $8, $9, $10)`,
    [id, scope.tenant, s.header.session.title ?? s.lastTitle ?? null, s.openTurn ? 'RUNNING' : 'IDLE', s.eventCount,
     s.turnCount, s.pendingInputs, s.fork?.forkedAtSeq ?? null, s.fork?.inheritedEventCount ?? 0, s.fork?.firstLiveSeq ?? 0, CURRENT_FORMAT_VERSION],
  );
}

// An imported session owns all its rows, its inherited prefix included: there
// is no parent to share it with. `inherited` is derived from its marker
// (inheritedEventCount), which the validator checked against the lines' flags.
async function insertEvents(client: pg.PoolClient, sessionId: string, events: Array<RecordingEvent & { pendingInputCount: number }>) {
  if (events.length === 0) return;
  await client.query(
    `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "createdAt")
     SELECT $1, e.seq, $1, e.type, e.data, e.synthetic, e."pendingInputCount", COALESCE(e."createdAt", now())
       FROM jsonb_to_recordset($2::jsonb)
         AS e(seq int, type text, data jsonb, synthetic boolean, "pendingInputCount" int, "createdAt" timestamptz)`,
    [sessionId, JSON.stringify(events)],
  );
}
