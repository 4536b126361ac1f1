// The progress of a recording import (POST /recordings, ARCHITECTURE.md) for a
// client that asks for it with `Accept: application/x-ndjson`.
// A 200,000-event recording spools in a second and then imports for tens of
// seconds: without this the uploader sees nothing between "sent" and its answer.
// An import still running after the first interval is answered 200 with JSON
// Lines: `{"progress": {"bytes", "totalBytes", "lines", "queued"}}` each interval (the
// spool read so far; `queued`: it waits for one of the process's import slots,
// FORKLINE_MAX_IMPORTS_AT_ONCE, and has read nothing yet), then its outcome as the last line, the body the plain
// answer would have had plus its `status` (`{"status": 201, "session": …}` or
// `{"status": 400, "errors": […]}`). A sooner outcome is answered as before.
import type http from 'node:http';
import { reply } from './http-body.ts';

const NEWLINE = 10;
export const PROGRESS_INTERVAL_MS = 250;

/** Whether the uploader takes its answer as progress lines (its Accept names application/x-ndjson). */
export const wantsProgress = (req: http.IncomingMessage) => /(^|[\s,])application\/x-ndjson\b/i.test(req.headers.accept ?? '');

export class ImportProgress {
  #bytes = 0;
  #lines = 0;
  /** Whether the import has begun reading (until then it waits for an import slot). */
  #started = false;
  #streaming = false;
  #timer: NodeJS.Timeout;

  constructor(
    private readonly res: http.ServerResponse,
    private readonly totalBytes: number,
    intervalMs = PROGRESS_INTERVAL_MS,
  ) {
    this.#timer = setInterval(() => this.#tick(), intervalMs);
    this.#timer.unref();
  }

  /** The spool as the import reads it, counted as it passes (the import's backpressure paces the reads). */
  async *counting(source: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
    this.#started = true;
    for await (const chunk of source) {
      this.#bytes += chunk.length;
      for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, i + 1)) this.#lines++;
      yield chunk;
    }
  }

  #tick() {
    const res = this.res;
    if (res.writableEnded || res.destroyed) return;
    if (!this.#streaming) {
      res.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store' });
      this.#streaming = true;
    }
    // A client that does not read gets no pile of lines: a tick is skipped until it has drained.
    if (res.writableNeedDrain) return;
    res.write(`${JSON.stringify({ progress: { bytes: this.#bytes, totalBytes: this.totalBytes, lines: this.#lines, queued: !this.#started } })}\n`);
  }

  /** The answer: its last line when progress is streaming, else a plain JSON answer. No more progress after it. */
  answer(status: number, body: object, headers: Record<string, string> = {}) {
    clearInterval(this.#timer);
    if (!this.#streaming) return reply(this.res, status, body, headers);
    if (!this.res.writableEnded) this.res.end(`${JSON.stringify({ status, ...body })}\n`);
  }

  /** Stops the progress; a stream still open ends with this error (the import stopped without another answer). */
  stop(status: number, code: string, message: string) {
    clearInterval(this.#timer);
    if (this.#streaming && !this.res.writableEnded) this.answer(status, { errors: [{ message, extensions: { code } }] });
  }
}
