// Export and import of a recording larger than the old 64 MB ceiling through
// the real HTTP doors of a service process: GET /recordings
// streams the log as it reads it, POST /recordings spools and imports it as a
// stream. The service runs with a capped JavaScript heap (without a cap V8
// lets garbage pile up, and RSS growth moved 16–147 MB between runs); its
// resident memory is sampled while each runs, the growth printed and asserted
// well below the recording's size. No time is asserted.
//
// Runtime: the session (300,000 events, ~75 MB as a recording) is written in
// bulk inside Postgres in a few seconds; the import through the door takes
// most of this test's minute or two.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createLongSession } from '../../bench/long-session.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';

const EVENTS = 300_000;
/** Fattens each answer: ~1.6 kB, so the recording passes 64 MB with a log that imports in reasonable time. */
const SUFFIX = Array.from({ length: 160 }, (_, i) => `filler${i % 10}`).join(' ');

/** The service's old-space limit (MB). */
const HEAP_CAP_MB = 192;

let service: ServiceProcess;
let db: Database;
let sessionId: string;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-big-recording-'));

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  db = openDatabase(databaseUrl, { max: 4 });
  const store = new SessionStore(db.pool, toolEffectOf);
  sessionId = (await createLongSession({ store, db }, EVENTS, { title: 'big recording', answerSuffix: SUFFIX })).id;
  // The JavaScript heap is capped: the doors must work in a bounded heap, and RSS then measures what they hold, not garbage V8 had no reason to collect yet.
  service = await startService({ env: { DATABASE_URL: databaseUrl, FORKLINE_API_TOKENS: undefined, NODE_OPTIONS: `--max-old-space-size=${HEAP_CAP_MB}` } });
}, 180_000);

afterAll(async () => {
  await service?.stop();
  await db?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** The service's resident set (kB), sampled every 50 ms while `fn` runs: its value before and the highest seen. */
async function rssDuring<T>(fn: () => Promise<T>): Promise<{ result: T; beforeMB: number; peakMB: number }> {
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${service.child.pid}/status`, 'utf8'))![1]) / 1024;
  const beforeMB = rss();
  let peakMB = beforeMB;
  const timer = setInterval(() => (peakMB = Math.max(peakMB, rss())), 50);
  try {
    const result = await fn();
    return { result, beforeMB, peakMB: Math.max(peakMB, rss()) };
  } finally {
    clearInterval(timer);
  }
}

describe('a recording over 64 MB through the HTTP doors', () => {
  it('exports as a stream and imports back, with bounded server memory', async () => {
    const recordings = service.url.replace(/\/graphql$/, '/recordings');
    const file = path.join(dir, 'big.jsonl');

    const exported = await rssDuring(async () => {
      const res = await fetch(`${recordings}?session=${sessionId}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-forkline-event-count')).toBe(String(EVENTS));
      await pipeline(Readable.fromWeb(res.body as never), fs.createWriteStream(file));
    });
    const bytes = fs.statSync(file).size;
    expect(bytes).toBeGreaterThan(64 * 2 ** 20);
    const lines = fs.readFileSync(file, 'utf8').split('\n').filter(Boolean);
    expect(lines).toHaveLength(1 + EVENTS);
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ seq: EVENTS - 1 });

    const imported = await rssDuring(async () => {
      const res = await fetch(recordings, {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson' },
        body: Readable.toWeb(fs.createReadStream(file)) as never,
        duplex: 'half',
      } as RequestInit);
      const body = (await res.json()) as { session?: { id: string; eventCount: number } };
      expect(res.status, JSON.stringify(body).slice(0, 300)).toBe(201);
      return body.session!;
    });
    expect(imported.result.eventCount).toBe(EVENTS);
    const again = await postGraphQL(service.url, 'query($id: ID!) { session(id: $id) { title eventCount } }', { id: imported.result.id });
    expect(again.body.data.session).toEqual({ title: 'big recording', eventCount: EVENTS });

    const sizeMB = bytes / 2 ** 20;
    const exportGrowth = exported.peakMB - exported.beforeMB;
    const importGrowth = imported.peakMB - imported.beforeMB;
    console.log(
      `recording ${sizeMB.toFixed(1)} MB, ${EVENTS} events; server RSS growth: export ${exportGrowth.toFixed(1)} MB ` +
        `(from ${exported.beforeMB.toFixed(0)} MB), import ${importGrowth.toFixed(1)} MB (from ${imported.beforeMB.toFixed(0)} MB)`,
    );
    // Both ran within the capped heap (the process is alive and answered), growing by well under the
    // recording's size: neither door holds it (the Session.recording string path took +320 MB for 132 MB).
    expect(service.child.exitCode).toBeNull();
    expect(exportGrowth).toBeLessThan(sizeMB / 2);
    expect(importGrowth).toBeLessThan(sizeMB / 2);
  }, 300_000);
});
