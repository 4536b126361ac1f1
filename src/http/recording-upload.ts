// POST /recordings: imports a recording streamed as the raw request body
// (JSON Lines), for recordings too large to send as a GraphQL string argument.
// The body is spooled to a file under the data directory (its hash is the
// idempotency key's request hash, and a slow client holds no transaction
// open); importRecording then reads the file once, as bytes, validating and
// writing as it goes, so memory stays at one chunk whatever the size (the limit,
// FORKLINE_MAX_RECORDING_BYTES, bounds the disk it takes): invalid
// UTF-8 is rejected naming its line. Same rules as the mutation: tenant, limits, errors with codes.
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomUUID } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import type http from 'node:http';
import { ForklineError } from '../core/errors.ts';
import { MAX_RECORDING_BYTES } from '../core/recording.ts';
import { idSchema, MAX_ID_CHARS } from '../core/input-rules.ts';
import type { RecordingSource } from '../store/recordings.ts';
import type { SessionRow } from '../store/session-store.ts';
import type { Idempotency } from '../host/controller.ts';
import type { Guard } from './guard.ts';
import { isDatabaseUnavailable, RETRY_AFTER_SECONDS } from '../db/unavailable.ts';
import { refuseTooLarge, reply, replyError as error } from './http-body.ts';
import { isProcessAlive } from '../pid-alive.ts';

/** Not a CORS-simple type: a cross-site page cannot post it without a preflight. */
const CONTENT_TYPES = new Set(['application/x-ndjson', 'application/jsonl', 'application/jsonlines']);

export interface RecordingUploadOptions {
  /** Imports the spooled recording (SessionController.importRecording: idempotency keys included). */
  importRecording: (scope: { tenant: string }, source: RecordingSource, idem: Idempotency, limits: { maxBytes: number }) => Promise<SessionRow>;
  /** Who is calling and from where: the guard of every door. */
  guard: Guard;
  log: (msg: string, err?: unknown) => void;
  maxBytes?: number;
  /** Where bodies are spooled while they are imported (leftovers of a killed process are removed at start). */
  spoolDir: string;
}

class TooLarge extends Error {}
const tooLarge = (limit: number) => ({ code: 'BAD_USER_INPUT', message: `recordings are limited to ${limit} bytes (send larger ones in parts, or raise the limit)` });

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
    const spool = path.join(opts.spoolDir, `${process.pid}-${randomUUID()}.jsonl`);
    try {
      let bytes = 0;
      // Hashed as it arrives: a retry with the same key must carry the same recording.
      const hash = createHash('sha256');
      const limit = new Transform({
        transform(chunk: Buffer, _enc, done) {
          bytes += chunk.length;
          hash.update(chunk);
          done(bytes > maxBytes ? new TooLarge() : null, chunk);
        },
      });
      await pipeline(req, limit, fs.createWriteStream(spool, { mode: 0o600 }));
      const session = await opts.importRecording(
        { tenant: principal.tenant },
        () => fs.createReadStream(spool),
        { key, requestHash: hash.digest('hex') },
        { maxBytes },
      );
      await fs.promises.rm(spool, { force: true }); // before the answer: nothing is left behind once the client knows
      reply(res, 201, { session: { id: session.id, eventCount: session.eventCount, formatVersion: session.formatVersion, title: session.title } });
    } catch (err) {
      if (err instanceof TooLarge) refuseTooLarge(req, res, tooLarge(maxBytes));
      else if (err instanceof ForklineError) error(res, 400, err.code, err.message);
      else if (isDatabaseUnavailable(err)) {
        opts.log('recording upload: database unavailable', err);
        error(res, 503, 'SERVICE_UNAVAILABLE', 'the database is unavailable or out of connections; retry shortly', { 'retry-after': String(RETRY_AFTER_SECONDS) });
      }
      else if (!res.headersSent) {
        const requestId = randomUUID().slice(0, 8);
        opts.log(`recording upload failed (request ${requestId})`, err);
        error(res, 500, 'INTERNAL_SERVER_ERROR', `Unexpected error (request ${requestId})`);
      }
    } finally {
      await fs.promises.rm(spool, { force: true });
    }
  };
}
