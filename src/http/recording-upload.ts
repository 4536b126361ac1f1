// POST /recordings: imports a recording streamed as the raw request body
// (JSON Lines), for recordings too large to send as a GraphQL string argument.
// The body is spooled to a file under the data directory (its hash is the
// idempotency key's request hash, and a slow client holds no transaction
// open); importRecording then reads the file once, as bytes, validating and
// writing as it goes, so memory stays at one line whatever the size (the limit,
// FORKLINE_MAX_RECORDING_BYTES, bounds the disk it takes): invalid
// UTF-8 is rejected naming its line. Same rules as the mutation: tenant, limits, errors with codes.
// Memory and disk are bounded whatever the clients send: a line past
// FORKLINE_MAX_RECORDING_LINE_BYTES is refused as it arrives (413, before it is
// spooled whole), a tenant runs at most FORKLINE_MAX_UPLOADS_PER_TENANT uploads
// at once (429) and has at most FORKLINE_MAX_IMPORTS_PER_TENANT imports running or
// waiting for a slot, whatever the door (429, host/import-slots.ts), and all uploads in progress spool at most
// FORKLINE_UPLOAD_SPOOL_MAX_BYTES (503 past it).
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import type http from 'node:http';
import { ForklineError } from '../core/errors.ts';
import { MAX_RECORDING_BYTES, MAX_RECORDING_LINE_BYTES } from '../core/recording.ts';
import { idSchema, MAX_ID_CHARS } from '../core/input-rules.ts';
import type { ImportLimits, RecordingSource } from '../store/recordings.ts';
import type { SessionRow } from '../store/session-store.ts';
import type { Idempotency } from '../host/controller.ts';
import type { Guard } from './guard.ts';
import { isDatabaseUnavailable, RETRY_AFTER_SECONDS } from '../db/unavailable.ts';
import { refuseTooLarge, reply, replyError as error } from './http-body.ts';
import { isProcessAlive } from '../pid-alive.ts';
import { DEFAULT_LIMITS } from './security.ts';
import { REVOKED_REASON } from './token-connections.ts';
import { ImportProgress, wantsProgress } from './import-progress.ts';

/** Not a CORS-simple type: a cross-site page cannot post it without a preflight. */
const CONTENT_TYPES = new Set(['application/x-ndjson', 'application/jsonl', 'application/jsonlines']);

export interface RecordingUploadOptions {
  /** Imports the spooled recording (SessionController.importRecording: idempotency keys included). */
  importRecording: (scope: { tenant: string }, source: RecordingSource, idem: Idempotency, limits: ImportLimits) => Promise<SessionRow>;
  /**
   * Why an import of the tenant would be refused now (SessionController.importRefusal: its import share is full), or
   * undefined: asked before the body is read.
   */
  importRefusal?: (tenant: string) => { message: string; details?: { retryAfterSeconds?: unknown } } | undefined;
  /** Undoes an import whose uploader went before its answer (SessionController.discardSession); false: kept. */
  discardImport: (scope: { tenant: string }, sessionId: string, idem: Idempotency) => Promise<boolean>;
  /** Who is calling and from where: the guard of every door. */
  guard: Guard;
  log: (msg: string, err?: unknown) => void;
  maxBytes?: number;
  /** Longest line of a recording (an event, or a file content in base64). */
  maxLineBytes?: number;
  /** Distinct file contents a recording's change sets may name (default MAX_RECORDING_CONTENTS). */
  maxContents?: number;
  /** Uploads one tenant may have in progress at once (spooling or importing). */
  uploadsPerTenant?: number;
  /** Bytes all uploads in progress may spool together (the disk the spool takes at most). */
  spoolMaxBytes?: number;
  /** Where bodies are spooled while they are imported (leftovers of a killed process are removed at start). */
  spoolDir: string;
}

const UPLOAD_RETRY_AFTER_SECONDS = 5;

class TooLarge extends Error {
  constructor(readonly refusal: { code: string; message: string }) {
    super(refusal.message);
  }
}
class SpoolFull extends Error {}
class Revoked extends Error {}
const REVOKED_DURING_UPLOAD = `${REVOKED_REASON} during the upload: nothing was imported`;
/** The uploader's token was revoked or expired under way: nothing imported, the rest of the body read and dropped (as a 413's). */
function refuseRevoked(req: http.IncomingMessage, res: http.ServerResponse) {
  req.resume();
  error(res, 401, 'UNAUTHENTICATED', REVOKED_DURING_UPLOAD, { connection: 'close' });
}
const tooLarge = (limit: number) => ({
  code: 'BAD_USER_INPUT',
  message: `recordings are limited to ${limit} bytes (send larger ones in parts, or raise the limit)`,
});
const lineTooLong = (limit: number, line: number) => ({
  code: 'BAD_USER_INPUT',
  message: `line ${line}: size: a line is longer than the limit of ${limit} bytes per line (FORKLINE_MAX_RECORDING_LINE_BYTES)`,
});

const SPOOL_FILE = /^(\d+)-[0-9a-f-]+\.jsonl$/;
/** Spool files are named `<pid>-<uuid>.jsonl`: those of a process that is gone (killed mid-upload) are removed. */
export function removeSpoolLeftovers(dir: string): number {
  let removed = 0;
  for (const name of fs.existsSync(dir) ? fs.readdirSync(dir) : []) {
    const m = SPOOL_FILE.exec(name);
    if (m && !isProcessAlive(Number(m[1]))) {
      fs.rmSync(path.join(dir, name), { force: true });
      removed++;
    }
  }
  return removed;
}

export function recordingUpload(opts: RecordingUploadOptions) {
  const maxBytes = opts.maxBytes ?? MAX_RECORDING_BYTES;
  const maxLineBytes = opts.maxLineBytes ?? MAX_RECORDING_LINE_BYTES;
  const uploadsPerTenant = opts.uploadsPerTenant ?? DEFAULT_LIMITS.uploadsPerTenant;
  const spoolMaxBytes = opts.spoolMaxBytes ?? DEFAULT_LIMITS.uploadSpoolMaxBytes;
  /** Uploads in progress per tenant, and the bytes all of them have spooled. */
  const inProgress = new Map<string, number>();
  let spooled = 0;
  // Only the spool itself is private: a recursive mkdir would give its parents
  // (the data directory, which the embedded Postgres's own user must enter) 0700 too.
  fs.mkdirSync(path.dirname(opts.spoolDir), { recursive: true });
  fs.mkdirSync(opts.spoolDir, { recursive: true, mode: 0o700 });
  const removed = removeSpoolLeftovers(opts.spoolDir);
  if (removed) opts.log(`removed ${removed} upload spool file(s) left by a stopped process`);
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    if (req.method !== 'POST') return error(res, 405, 'BAD_USER_INPUT', 'POST a recording (JSON Lines) to /recordings', { allow: 'POST' });
    const principal = opts.guard.callerOf(req, res);
    if (!principal) return;
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (!CONTENT_TYPES.has(type)) {
      return error(res, 415, 'BAD_USER_INPUT', `send the recording with content-type ${[...CONTENT_TYPES][0]}`);
    }
    // Checked before reading anything.
    if (Number(req.headers['content-length'] ?? 0) > maxBytes) return refuseTooLarge(req, res, tooLarge(maxBytes));

    const key = req.headers['idempotency-key'];
    if (key !== undefined && (typeof key !== 'string' || !idSchema.safeParse(key).success)) {
      return error(res, 400, 'BAD_USER_INPUT', `Idempotency-Key must be 1 to ${MAX_ID_CHARS} characters`);
    }
    const tenant = principal.tenant;
    const running = inProgress.get(tenant) ?? 0;
    if (running >= uploadsPerTenant) {
      // Refused before the body is read: the connection closes with the answer.
      return error(
        res,
        429,
        'RATE_LIMITED',
        `at most ${uploadsPerTenant} recording uploads of a tenant run at once (FORKLINE_MAX_UPLOADS_PER_TENANT); retry when one has finished`,
        {
          'retry-after': String(UPLOAD_RETRY_AFTER_SECONDS),
          connection: 'close',
        },
      );
    }
    // The tenant's imports are at their share (FORKLINE_MAX_IMPORTS_PER_TENANT, over every door): refused before the
    // body is read, as above. Before, the body was spooled whole (up to FORKLINE_MAX_RECORDING_BYTES to disk) and
    // only then refused by the import, so a tenant at its share could make the process write bodies it would refuse.
    const importsFull = opts.importRefusal?.(tenant);
    if (importsFull) {
      return error(res, 429, 'RATE_LIMITED', importsFull.message, {
        'retry-after': String(importsFull.details?.retryAfterSeconds ?? UPLOAD_RETRY_AFTER_SECONDS),
        connection: 'close',
      });
    }
    inProgress.set(tenant, running + 1);
    // A client that goes before its answer (a cancelled import) leaves nothing: the body stops spooling, the
    // import's transaction rolls back however far it got (store/recordings.ts checks the signal up to its commit),
    // or its session is discarded once committed (host/controller.ts), up to the moment the answer is written.
    const gone = new AbortController();
    res.on('close', () => !res.writableFinished && gone.abort(new Error('the client closed the upload')));
    // A token revoked or expired during the upload stops it the same way (nothing is imported), and is answered 401.
    const revoked = opts.guard.tokens.takeRevocation(res);
    const spool = path.join(opts.spoolDir, `${process.pid}-${randomUUID()}.jsonl`);
    let bytes = 0;
    let released = false;
    /** Once the body is spooled: the import's progress, for an uploader that asked for it (import-progress.ts). */
    let progress: ImportProgress | undefined;
    /** An answer about the import: a progress stream's last line once one has started. */
    const answer = (status: number, body: object, headers?: Record<string, string>) =>
      progress ? progress.answer(status, body, headers) : reply(res, status, body, headers);
    const fail = (status: number, code: string, message: string, headers?: Record<string, string>) =>
      answer(status, { errors: [{ message, extensions: { code } }] }, headers);
    // Before the answer: a client that sends its next upload once it has one finds the slot free.
    const release = () => {
      if (released) return;
      released = true;
      spooled -= bytes;
      const left = (inProgress.get(tenant) ?? 1) - 1;
      if (left > 0) inProgress.set(tenant, left);
      else inProgress.delete(tenant);
    };
    try {
      // Hashed as it arrives: a retry with the same key must carry the same recording.
      const hash = createHash('sha256');
      /** Lines ended so far, and bytes since the last newline: a line past the limit is refused before it is spooled whole. */
      let lines = 0;
      let lineBytes = 0;
      const limit = new Transform({
        transform(chunk: Buffer, _enc, done) {
          if (spooled + chunk.length > spoolMaxBytes) return done(new SpoolFull());
          bytes += chunk.length;
          spooled += chunk.length;
          hash.update(chunk);
          if (bytes > maxBytes) return done(new TooLarge(tooLarge(maxBytes)));
          for (let nl = chunk.indexOf(10), start = 0; ; nl = chunk.indexOf(10, start)) {
            lineBytes += (nl === -1 ? chunk.length : nl) - start;
            if (lineBytes > maxLineBytes) return done(new TooLarge(lineTooLong(maxLineBytes, lines + 1)));
            if (nl === -1) break;
            lines++;
            lineBytes = 0;
            start = nl + 1;
          }
          done(null, chunk);
        },
      });
      const onRevoked = () => {
        limit.destroy(new Revoked());
        gone.abort(revoked!.reason);
      };
      if (revoked?.aborted) onRevoked();
      else revoked?.addEventListener('abort', onRevoked, { once: true });
      await pipeline(req, limit, fs.createWriteStream(spool, { mode: 0o600 }));
      const idem = { key, requestHash: hash.digest('hex') };
      progress = wantsProgress(req) ? new ImportProgress(res, bytes) : undefined;
      const read = () => (progress ? progress.counting(fs.createReadStream(spool)) : fs.createReadStream(spool));
      const session = await opts.importRecording({ tenant }, read, idem, { maxBytes, maxLineBytes, maxContents: opts.maxContents, signal: gone.signal });
      await fs.promises.rm(spool, { force: true }); // before the answer: nothing is left behind once the client knows
      release();
      // Gone since the import returned: the cancel still wins (no await between this check and the answer).
      if (gone.signal.aborted && (await opts.discardImport({ tenant }, session.id, idem))) {
        if (!revoked?.aborted) return;
        return res.headersSent ? progress?.stop(401, 'UNAUTHENTICATED', REVOKED_DURING_UPLOAD) : refuseRevoked(req, res);
      }
      answer(201, { session: { id: session.id, eventCount: session.eventCount, formatVersion: session.formatVersion, title: session.title } });
    } catch (err) {
      await fs.promises.rm(spool, { force: true });
      release();
      if (revoked?.aborted && !res.headersSent) return refuseRevoked(req, res);
      if (gone.signal.aborted) return revoked?.aborted ? progress?.stop(401, 'UNAUTHENTICATED', REVOKED_DURING_UPLOAD) : undefined; // else nobody to answer
      if (err instanceof TooLarge) refuseTooLarge(req, res, err.refusal);
      else if (err instanceof SpoolFull) {
        error(
          res,
          503,
          'SERVICE_UNAVAILABLE',
          `uploads in progress would spool more than ${spoolMaxBytes} bytes (FORKLINE_UPLOAD_SPOOL_MAX_BYTES); retry shortly`,
          {
            'retry-after': String(UPLOAD_RETRY_AFTER_SECONDS),
            connection: 'close',
          },
        );
      } else if (err instanceof ForklineError && err.code === 'RATE_LIMITED') {
        // The tenant's share of the import slots is taken (host/import-slots.ts): running or waiting already.
        fail(429, err.code, err.message, { 'retry-after': String(err.details?.retryAfterSeconds ?? UPLOAD_RETRY_AFTER_SECONDS) });
      } else if (err instanceof ForklineError) fail(err.details?.rule === 'size' ? 413 : 400, err.code, err.message);
      else if (isDatabaseUnavailable(err)) {
        opts.log('recording upload: database unavailable', err);
        fail(503, 'SERVICE_UNAVAILABLE', 'the database is unavailable or out of connections; retry shortly', {
          'retry-after': String(RETRY_AFTER_SECONDS),
        });
      } else if (!res.headersSent || progress) {
        const requestId = randomUUID().slice(0, 8);
        opts.log(`recording upload failed (request ${requestId})`, err);
        fail(500, 'INTERNAL_SERVER_ERROR', `Unexpected error (request ${requestId})`);
      }
    } finally {
      progress?.stop(500, 'INTERNAL_SERVER_ERROR', 'the import stopped without an answer');
      await fs.promises.rm(spool, { force: true });
      release();
    }
  };
}
