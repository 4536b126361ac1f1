// bulkImport: a 200,000-event recording (20,000 with BENCH_QUICK=1) imported
// through `POST /recordings` (validation included), against the baseline of
// a raw `COPY` of the same rows into the real Event table, with its indexes
// and its generated search vector, in the same run. The two are alternated so
// shared load hits both alike; the figures are medians. Goal: import ≥ 0.5×
// the COPY's speed (ratio = copy time / import time). For scale, the same
// COPY into a plain table (Event's columns only) is measured too.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { from as copyFrom } from 'pg-copy-streams';
import { createApp } from '../src/app.ts';
import { exportRecording } from '../src/store/recordings.ts';
import { newSessionId } from '../src/store/ids.ts';
import { QUICK, round, rssMB, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';

const scope = { tenant: 'local' };

/** COPY's text format: a backslash, tab or line break inside a field is escaped. */
const copyField = (s: string) => s.replace(/[\\\t\n\r]/g, (c) => (c === '\\' ? '\\\\' : c === '\t' ? '\\t' : c === '\n' ? '\\n' : '\\r'));

export async function benchBulkImport(ctx: BenchContext) {
  const { db, store, databaseUrl } = ctx;
  const events = QUICK ? 20_000 : 200_000;
  const rounds = QUICK ? 2 : 3;
  const source = await createLongSession(ctx, events);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-bulk-import-'));
  const file = path.join(dir, 'recording.jsonl');
  await pipeline(Readable.from((await exportRecording(store.forTenant(scope), source.id)).lines), fs.createWriteStream(file));
  const bytes = fs.statSync(file).size;
  // The baseline's rows, made before it is timed: the recording's events as COPY text.
  const rows = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .slice(1)
    .filter(Boolean)
    .map((l) => {
      const e = JSON.parse(l) as { seq: number; type: string; data: unknown; createdAt: string };
      return [e.seq, e.type, copyField(JSON.stringify(e.data)), 'f', 0, e.createdAt];
    });

  const app = await createApp({ databaseUrl, log: () => {}, uploadDir: path.join(dir, 'uploads') });
  const uploadUrl = app.url.replace(/\/graphql$/, '/recordings');
  let peakRssGrowthMB = 0;
  const viaHttp = async () => {
    // Memory is reported, not held to a goal: the import runs in this process, sampled every 20 ms.
    const startRss = rssMB();
    const sampler = setInterval(() => (peakRssGrowthMB = Math.max(peakRssGrowthMB, rssMB() - startRss)), 20);
    const t = performance.now();
    const res = await fetch(uploadUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson', 'content-length': String(bytes) },
      body: Readable.toWeb(fs.createReadStream(file)) as ReadableStream,
      duplex: 'half',
    } as RequestInit);
    const body = (await res.json()) as { session?: { eventCount: number } };
    const ms = performance.now() - t;
    clearInterval(sampler);
    if (res.status !== 201 || body.session?.eventCount !== events) throw new Error(`import failed: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    return ms;
  };
  const EVENT_COLUMNS = '("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "createdAt")';
  // A raw COPY of the rows (in 64 kB messages, as psql sends them) into `table`, after the session row.
  const rawCopy = async (table: string) => {
    const id = newSessionId();
    const text = Buffer.from(`${rows.map((r) => `${id}\t${r[0]}\t${id}\t${r[1]}\t${r[2]}\t${r[3]}\t${r[4]}\t${r[5]}`).join('\n')}\n`);
    const chunks = Array.from({ length: Math.ceil(text.length / 65536) }, (_, i) => text.subarray(i * 65536, (i + 1) * 65536));
    const client = await db.pool.connect();
    try {
      const t = performance.now();
      await client.query('BEGIN');
      await client.query(`INSERT INTO "SessionTree" (id, "treeId") VALUES ($1, $1)`, [id]);
      await client.query(`INSERT INTO "Session" (id, tenant, "treeId", "eventCount") VALUES ($1, 'local', $1, $2)`, [id, events]);
      await pipeline(Readable.from(chunks), client.query(copyFrom(`COPY ${table} ${EVENT_COLUMNS} FROM STDIN`)));
      await client.query('COMMIT');
      return performance.now() - t;
    } finally {
      client.release();
    }
  };
  // For scale: the same COPY into a table with Event's columns and nothing else (no index, key, generated column).
  await db.pool.query(`CREATE TABLE IF NOT EXISTS bench_plain_event (LIKE "Event" EXCLUDING ALL)`);
  try {
    const http: number[] = [];
    const copy: number[] = [];
    const plain: number[] = [];
    const runs = [
      async () => http.push(await viaHttp()),
      async () => copy.push(await rawCopy('"Event"')),
      async () => plain.push(await rawCopy('bench_plain_event')),
    ];
    // Each round in another order: what one run leaves behind (a checkpoint, the index's pending list) falls on each in turn.
    for (let i = 0; i < rounds; i++) for (let k = 0; k < runs.length; k++) await runs[(i + k) % runs.length]();
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const [importMs, copyMs] = [median(http), median(copy)];
    return {
      events,
      recordingMB: round(bytes / 2 ** 20, 1),
      importMs: round(importMs, 0),
      rawCopyMs: round(copyMs, 0),
      importEventsPerSec: Math.round(events / (importMs / 1000)),
      rawCopyEventsPerSec: Math.round(events / (copyMs / 1000)),
      ratio: round(copyMs / importMs),
      plainTableCopyMs: round(median(plain), 0),
      importPeakRssGrowthMB: round(peakRssGrowthMB, 0),
      rounds,
      goal: 'ratio >= 0.5',
    };
  } finally {
    await app.close();
    await db.pool.query('DROP TABLE bench_plain_event');
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
