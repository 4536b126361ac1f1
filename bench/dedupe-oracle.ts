// `npm run bench:dedupe-oracle`: the cross-tenant storage-dedupe side
// channel, measured as an attacker would (docs/files.md "Contents are stored
// once per tenant"). Tenant A imports a recording carrying a content; tenant B
// then imports (POST /recordings) a recording carrying that same content, and
// one carrying a fresh content of the same size, in alternating order, trial
// after trial, each trial with new contents. Prints per size the request time
// of each (median and quartiles), the share of trials where B's "A holds it"
// import was the faster, and the WAL bytes Postgres wrote for each.
//
//   BENCH_SIZES=1024,200000,1048576,10485760,16777216  BENCH_TRIALS=40
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createApp } from '../src/app.ts';
import { pgConfigFromUrl } from '../src/db/pg-config.ts';
import { sha256 } from '../src/store/file-blobs.ts';
import { fileCallEvents } from '../tests/helpers/file-calls.ts';
import { openBenchContext, percentile, round } from './context.ts';

const sizes = (process.env.BENCH_SIZES ?? '1024,200000,1048576,10485760,16777216').split(',').map(Number);
const trials = Number(process.env.BENCH_TRIALS ?? 40);
const TOKENS = { A: 'alpha-token-0123456789abcdef', B: 'beta-token-0123456789abcdef0' };

function recordingOf(content: Buffer): string {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_probe', title: 'probe' } }];
  fileCallEvents(1, [{ path: 'probe.bin', hash: sha256(content), size: content.byteLength }]).forEach((e, seq) => lines.push({ seq, ...e }));
  lines.push({ blob: sha256(content), base64: content.toString('base64') });
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

const ctx = await openBenchContext();
const app = await createApp({
  databaseUrl: ctx.databaseUrl,
  log: () => {},
  security: {
    rateLimit: false,
    maxRecordingLineBytes: 24 * 1024 * 1024,
    apiTokens: new Map([
      [TOKENS.A, 'alpha'],
      [TOKENS.B, 'beta'],
    ]),
  },
  workspaceLimits: { maxFileBytes: 16 * 1024 * 1024, maxBytes: 64 * 1024 * 1024 },
});
await app.startupChecks;
const admin = new pg.Pool({ ...pgConfigFromUrl(ctx.databaseUrl), max: 1 });
const lsn = async () => BigInt((await admin.query<{ n: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS n`)).rows[0].n);
const url = app.url.replace(/\/graphql$/, '/recordings');

async function post(who: keyof typeof TOKENS, body: string): Promise<{ ms: number; wal: number }> {
  const wal0 = await lsn();
  const t = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${TOKENS[who]}` }, body });
  await res.text();
  const ms = performance.now() - t;
  if (res.status !== 201) throw new Error(`HTTP ${res.status}`);
  return { ms, wal: Number((await lsn()) - wal0) };
}

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `p50 ${round(percentile(s, 50))} (p25 ${round(percentile(s, 25))}, p75 ${round(percentile(s, 75))})`;
};

try {
  for (const size of sizes) {
    const held: Array<{ ms: number; wal: number }> = [];
    const fresh: Array<{ ms: number; wal: number }> = [];
    const n = size >= 8 * 1024 * 1024 ? Math.max(6, trials >> 2) : trials;
    for (let i = -2; i < n; i++) {
      const [x, y] = [randomBytes(size), randomBytes(size)];
      await post('A', recordingOf(x));
      const [rx, ry] = [recordingOf(x), recordingOf(y)];
      const order = i % 2 === 0 ? (['held', 'fresh'] as const) : (['fresh', 'held'] as const);
      for (const arm of order) {
        const r = await post('B', arm === 'held' ? rx : ry);
        if (i >= 0) (arm === 'held' ? held : fresh).push(r); // the first two trials warm up
      }
    }
    const faster = held.filter((h, i) => h.ms < fresh[i].ms).length;
    console.log(
      `${size} B, ${n} trials: B's import of content A holds ${stats(held.map((h) => h.ms))} ms, WAL ${stats(held.map((h) => h.wal))} B;` +
        ` of a fresh one ${stats(fresh.map((f) => f.ms))} ms, WAL ${stats(fresh.map((f) => f.wal))} B; held faster in ${faster}/${n}`,
    );
  }
} finally {
  await admin.end();
  await app.close();
  await ctx.close();
}
