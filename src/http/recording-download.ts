// GET /recordings?session=<id>: a session's recording (JSON Lines, format V4)
// streamed as it is read, page by page, for recordings too large for the
// Session.recording string. Memory stays at a page and the socket's buffer:
// the next line waits while the client is slow (backpressure). The
// X-Forkline-Event-Count header tells how many event lines follow the header
// line, so a client can show progress; the blob lines (file contents) come
// after them.
import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { ForklineError } from '../core/errors.ts';
import { exportRecording } from '../store/recordings.ts';
import type { TenantStores } from '../host/services.ts';
import type { Guard } from './guard.ts';
import type { DoorStatements } from './door-statements.ts';
import { StatementAbandonedError, StatementTimeoutError } from '../db/statement-deadlines.ts';
import { replyError as error } from './http-body.ts';

export const EVENT_COUNT_HEADER = 'x-forkline-event-count';

export function recordingDownload(opts: { store: TenantStores; guard: Guard; statements: DoorStatements; log: (msg: string, err?: unknown) => void }) {
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const principal = opts.guard.callerOf(req, res);
    if (!principal) return;
    const id = new URL(req.url ?? '/', 'http://x').searchParams.get('session');
    if (!id) return error(res, 400, 'BAD_USER_INPUT', 'name the session: GET /recordings?session=<id>');
    // Held open as long as the client reads: a connection under its tenant's and its token's caps.
    const capped = opts.guard.openStream(req, res, false);
    if (capped) return error(res, capped.status, capped.code, capped.message, capped.headers);
    let recording: Awaited<ReturnType<typeof exportRecording>>;
    try {
      // Its reads within the request's scope: cancelled once the client leaves; each statement bounded (a download lasts as long as it streams).
      const store = opts.store.forTenant({ tenant: principal.tenant }).reading(opts.statements(res, 'statement'));
      recording = await exportRecording(store, id);
    } catch (err) {
      if (err instanceof ForklineError) return error(res, err.code === 'SESSION_NOT_FOUND' ? 404 : 400, err.code, err.message);
      if (err instanceof StatementTimeoutError) return error(res, 503, err.code, err.message);
      if (err instanceof StatementAbandonedError) return; // its client has gone: nobody to answer
      throw err;
    }
    const { session, lines } = recording;
    const name = `${(session.title ?? session.id).replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 80) || session.id}.jsonl`;
    res.writeHead(200, {
      'content-type': 'application/x-ndjson; charset=utf-8',
      'content-disposition': `attachment; filename="${name}"`,
      'cache-control': 'no-store',
      [EVENT_COUNT_HEADER]: String(session.eventCount),
      'access-control-expose-headers': EVENT_COUNT_HEADER,
    });
    const closed = new Promise<void>((resolve) => res.once('close', resolve));
    try {
      let chunk = '';
      for await (const line of lines) {
        // Lines are gathered into writes of about 64 kB (a longer line is written as it is, not copied into one); a full socket
        // buffer waits for 'drain' (or the client leaving).
        let more: boolean;
        if (line.length >= 64 * 1024) {
          if (chunk) res.write(chunk);
          chunk = '';
          more = res.write(line);
        } else {
          chunk += line;
          if (chunk.length < 64 * 1024) continue;
          more = res.write(chunk);
          chunk = '';
        }
        if (!more && (await Promise.race([once(res, 'drain').then(() => true), closed.then(() => false)])) === false) return;
        if (res.destroyed) return;
      }
      res.end(chunk);
    } catch (err) {
      // The status is sent: cut the stream so the client sees it incomplete, not a truncated file that looks whole.
      if (!(err instanceof StatementAbandonedError)) opts.log(`recording download failed (request ${randomUUID().slice(0, 8)})`, err);
      res.destroy();
    }
  };
}
