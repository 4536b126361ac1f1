// `forkline import`: a recording streamed from a file (or stdin) to POST
// /recordings, with progress on stderr when it is a terminal (or asked for):
// the bytes sent, then the server's import as it checks and writes the lines
// (a 200,000-event recording uploads in a second and imports for tens of
// seconds), then a summary line. Memory: a chunk, whatever the size.
import fs from 'node:fs';
import { Readable } from 'node:stream';
import type { ForklineClient, ImportProgress } from '@forkline/client';
import { eventLines, newlines } from './recording-stream.ts';

/** Progress redrawn at most this often (a terminal, not a log). */
const REDRAW_MS = 100;

export interface ImportOptions {
  /** One key for every attempt: a retry after a lost answer imports once. */
  idempotencyKey: string;
  /** Where progress goes (stderr), or nothing; on a terminal each redraw clears the rest of its line. */
  progress?: { write(s: string): unknown; isTTY?: boolean };
}

const mb = (bytes: number) => (bytes / 2 ** 20).toFixed(1);
const percent = (part: number, whole: number) => (whole > 0 ? ` (${Math.min(100, Math.floor((part / whole) * 100))}%)` : '');

/** Sends `file` ('-': stdin) once; resolves with the new session's id and event count. */
export async function importRecordingFile(client: ForklineClient, file: string, opts: ImportOptions): Promise<{ id: string; eventCount: number }> {
  const total = file === '-' ? 0 : fs.statSync(file).size;
  const name = file === '-' ? 'stdin' : file;
  let sent = 0;
  let sentLines = 0;
  let drawn = 0;
  const clear = opts.progress?.isTTY ? '\x1b[K' : '';
  const draw = (text: string, force = false) => {
    if (!opts.progress || (!force && Date.now() - drawn < REDRAW_MS)) return;
    drawn = Date.now();
    // Cleared to the end of the line: a shorter text leaves nothing of the last one behind.
    opts.progress.write(`\r${text}${clear}`);
  };
  const started = Date.now();
  const input = file === '-' ? process.stdin : fs.createReadStream(file);
  const counted = async function* () {
    for await (const chunk of input as AsyncIterable<Buffer>) {
      sent += chunk.length;
      sentLines += newlines(chunk);
      draw(`uploading ${name}: ${mb(sent)}${total ? ` of ${mb(total)}` : ''} MB${percent(sent, total)}, ${eventLines(sentLines).toLocaleString('en')} lines`);
      yield chunk;
    }
    draw(`uploaded ${name}: ${mb(sent)} MB; importing…`, true);
  };
  const onProgress = (p: ImportProgress) =>
    draw(
      p.queued
        ? `uploaded ${name}: ${mb(p.totalBytes)} MB; waiting for an import slot on the server…`
        : `importing ${name}: ${eventLines(p.lines).toLocaleString('en')} lines checked and written, ${mb(p.bytes)} of ${mb(p.totalBytes)} MB${percent(p.bytes, p.totalBytes)}`,
    );
  try {
    const session = await client.uploadRecording(Readable.toWeb(Readable.from(counted())) as ReadableStream<Uint8Array>, {
      idempotencyKey: opts.idempotencyKey,
      onProgress,
    });
    opts.progress?.write(
      `\rimported ${session.id}: ${session.eventCount.toLocaleString('en')} events, ${mb(sent)} MB in ${((Date.now() - started) / 1000).toFixed(1)} s${clear}\n`,
    );
    return session;
  } catch (err) {
    opts.progress?.write('\n'); // the error goes on a line of its own
    throw err;
  }
}
