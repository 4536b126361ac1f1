// COPY … FROM STDIN on a transaction's connection: rows in Postgres's text
// format, written as they are produced with the socket's backpressure (memory
// stays at one chunk). Bulk writes that would otherwise be many multi-row
// INSERTs (a recording's events) go through here.
import type pg from 'pg';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { from as copyFrom } from 'pg-copy-streams';

/** Rows are sent in chunks of about this many characters (one CopyData message each). */
const CHUNK_CHARS = 256 * 1024;

const ESCAPES: Record<string, string> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
/** A field in COPY's text format: backslash, tab and line breaks escaped. */
export const copyText = (s: string): string => s.replace(/[\\\t\n\r]/g, (c) => ESCAPES[c]);
/** JSON text (JSON.stringify's) as a COPY field: JSON.stringify escapes tabs and line breaks itself, so only backslashes remain. */
export const copyJsonText = (json: string): string => json.replaceAll('\\', '\\\\');

/**
 * Runs `COPY <target> FROM STDIN` with the rows `rows` yields (each one line
 * of tab-separated fields already in text format, see copyText). When `rows`
 * throws, the COPY is failed (CopyFail) and the error rethrown: the
 * connection is then usable again, and the transaction can roll back.
 * Returns the number of rows Postgres wrote.
 */
export async function copyRows(client: pg.PoolClient, target: string, rows: AsyncIterable<string>): Promise<number> {
  const stream = client.query(copyFrom(`COPY ${target} FROM STDIN`));
  async function* chunks() {
    let chunk = '';
    for await (const row of rows) {
      chunk += `${row}\n`;
      if (chunk.length >= CHUNK_CHARS) {
        yield chunk;
        chunk = '';
      }
    }
    if (chunk) yield chunk;
  }
  await pipeline(Readable.from(chunks(), { objectMode: false }), stream);
  return stream.rowCount;
}
