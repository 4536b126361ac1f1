// `forkline export`: a session's recording streamed from GET /recordings to a
// file or stdout as it arrives (memory: a chunk, whatever the recording's
// size), with progress on stderr when it is a terminal (or asked for).
import fs from 'node:fs';
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { ForklineClientError, type ForklineClient } from '@forkline/client';
import { eventLines, newlines, percentOf } from './recording-stream.ts';

/** Progress redrawn at most this often (a terminal, not a log). */
const REDRAW_MS = 100;

export interface ExportOptions {
  /** A file to write (replaced; removed again when the export fails); omitted: stdout. */
  output?: string;
  /** Where progress goes (stderr), or nothing. */
  progress?: { write(s: string): unknown };
}

/** Streams the recording out; resolves with what was written. A stream cut short rejects (and leaves no file). */
export async function exportRecording(client: ForklineClient, sessionId: string, opts: ExportOptions): Promise<{ events: number; bytes: number }> {
  const { eventCount, body } = await client.downloadRecording(sessionId);
  const out: Writable = opts.output ? fs.createWriteStream(opts.output) : process.stdout;
  let lines = 0;
  let bytes = 0;
  let drawn = 0;
  const draw = (done: boolean) => {
    const events = Math.min(eventLines(lines), eventCount);
    const mb = (bytes / 2 ** 20).toFixed(1);
    opts.progress?.write(
      done
        ? `\rexported ${sessionId}: ${events.toLocaleString('en')} events, ${mb} MB${opts.output ? ` to ${opts.output}` : ''}\n`
        : `\rexporting ${sessionId}: ${events.toLocaleString('en')} of ${eventCount.toLocaleString('en')} events (${percentOf(events, eventCount)}%), ${mb} MB`,
    );
  };
  try {
    const reader = body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      lines += newlines(value);
      bytes += value.length;
      // A slow file or pipe holds the next read: nothing piles up in memory.
      if (!out.write(value)) await once(out, 'drain');
      if (opts.progress && Date.now() - drawn >= REDRAW_MS) {
        drawn = Date.now();
        draw(false);
      }
    }
    if (opts.output) {
      out.end();
      await once(out, 'finish');
    }
  } catch (err) {
    if (opts.output) {
      out.destroy();
      fs.rmSync(opts.output, { force: true });
    }
    opts.progress?.write('\n');
    const message = `export of ${sessionId} cut short after ${eventLines(lines)} of ${eventCount} events: ${(err as Error).message}`;
    throw new ForklineClientError([{ message, extensions: { code: 'EXPORT_CUT_SHORT' } }]);
  }
  draw(true);
  return { events: eventLines(lines), bytes };
}
