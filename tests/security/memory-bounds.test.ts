// Memory and time at the doors, as a hostile tenant tries them (docs/operations.md
// "Threat model"): each attack is sent through the real doors of a service
// process whose resident memory is sampled while it runs, and /healthz is
// asked every 100 ms meanwhile. Growth under 300 MB and /healthz answering
// within 1 s are the bounds; the figures are printed.
import fs from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { startService, type ServiceProcess } from '../helpers/process.ts';
import { recordingHeader } from '../../src/core/recording.ts';

const MiB = 1024 * 1024;
let service: ServiceProcess;
let base: string;

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  service = await startService({ env: { DATABASE_URL: databaseUrl, FORKLINE_API_TOKENS: undefined, FORKLINE_MAX_UPLOADS_PER_TENANT: '1' } });
  base = service.url.replace(/\/graphql$/, '');
}, 120_000);

afterAll(async () => {
  await service?.stop();
});

/**
 * Runs `fn` while sampling the service's resident set (every 50 ms) and timing
 * /healthz (one request at a time, every 100 ms): RSS before and at its
 * highest (MB), and the slowest /healthz answer (ms).
 */
async function underWatch<T>(fn: () => Promise<T>): Promise<{ result: T; growthMB: number; slowestHealthzMs: number }> {
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${service.child.pid}/status`, 'utf8'))![1]) / 1024;
  const beforeMB = rss();
  let peakMB = beforeMB;
  const sampler = setInterval(() => (peakMB = Math.max(peakMB, rss())), 50);
  let slowest = 0;
  let stop = false;
  const healthz = (async () => {
    while (!stop) {
      const t0 = performance.now();
      const res = await fetch(`${base}/healthz`);
      await res.arrayBuffer();
      slowest = Math.max(slowest, performance.now() - t0);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  try {
    const result = await fn();
    return { result, growthMB: Math.max(peakMB, rss()) - beforeMB, slowestHealthzMs: slowest };
  } finally {
    stop = true;
    clearInterval(sampler);
    await healthz;
  }
}

/**
 * POSTs a recording to /recordings from `chunks` (written as fast as the
 * server takes them) until the server answers; its status and body. The body
 * is not finished once an answer has come.
 */
function upload(chunks: () => Iterator<Buffer>): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}/recordings`, { method: 'POST', agent: false, headers: { 'content-type': 'application/x-ndjson' } });
    let answered = false;
    req.on('response', (res) => {
      answered = true;
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => {
        req.destroy();
        resolve({ status: res.statusCode!, body: JSON.parse(text) });
      });
    });
    req.on('error', (err) => (answered ? undefined : reject(err)));
    const it = chunks();
    const pump = () => {
      for (;;) {
        if (answered) return;
        const next = it.next();
        if (next.done) return void req.end();
        if (!req.write(next.value)) return void req.once('drain', pump);
      }
    };
    pump();
  });
}

const header = Buffer.from(`${JSON.stringify(recordingHeader({ id: 'ses_attack', title: 'attack' }))}\n`);

describe('POST /recordings with huge lines', () => {
  it('refuses a 30 MiB file-content line naming the per-line limit, with bounded memory and a live /healthz (25 such lines sent)', async () => {
    // 25 lines of `{"blob": …, "base64": "AAAA…"}`, 30 MiB each, made of one shared buffer.
    const piece = Buffer.alloc(MiB, 'A');
    const lineStart = Buffer.from(`{"blob":"${'0'.repeat(64)}","base64":"`);
    const lineEnd = Buffer.from('"}\n');
    function* body() {
      yield header;
      for (let line = 0; line < 25; line++) {
        yield lineStart;
        for (let i = 0; i < 30; i++) yield piece;
        yield lineEnd;
      }
    }
    const run = await underWatch(() => upload(body));
    console.log(`30 MiB lines: status ${run.result.status}, RSS growth ${run.growthMB.toFixed(0)} MB, slowest /healthz ${run.slowestHealthzMs.toFixed(0)} ms`);
    expect(run.result.status).toBe(413);
    expect(run.result.body.errors[0].message).toMatch(/line 2: size: a line is longer than the limit of 16777216 bytes per line \(FORKLINE_MAX_RECORDING_LINE_BYTES\)/);
    expect(run.result.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(run.growthMB).toBeLessThan(300);
    expect(run.slowestHealthzMs).toBeLessThan(1000);
    // The service still imports a small recording afterwards.
    const ok = await upload(function* () {
      yield header;
    });
    expect(ok.status).toBe(201);
  }, 120_000);

  it('runs at most FORKLINE_MAX_UPLOADS_PER_TENANT uploads of a tenant at once (429 with Retry-After, before the body is read)', async () => {
    // The first upload stays open (its body unfinished) while the second is sent.
    const first = http.request(`${base}/recordings`, { method: 'POST', agent: false, headers: { 'content-type': 'application/x-ndjson' } });
    const firstAnswer = new Promise<number>((resolve, reject) => {
      first.on('response', (res) => (res.resume(), resolve(res.statusCode!)));
      first.on('error', reject);
    });
    first.write(header);
    let second: { status: number; headers: http.IncomingHttpHeaders; body: any } | undefined;
    for (let attempt = 0; attempt < 50; attempt++) {
      second = await new Promise((resolve, reject) => {
        const req = http.request(`${base}/recordings`, { method: 'POST', agent: false, headers: { 'content-type': 'application/x-ndjson' } }, (res) => {
          let text = '';
          res.on('data', (c) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(text) }));
        });
        req.on('error', reject);
        req.end(header);
      });
      if (second!.status === 429) break;
      await new Promise((r) => setTimeout(r, 100)); // the first upload's request had not reached its door yet
    }
    expect(second!.status).toBe(429);
    expect(second!.headers['retry-after']).toBe('5');
    expect(second!.body.errors[0]).toMatchObject({ extensions: { code: 'RATE_LIMITED' } });
    expect(second!.body.errors[0].message).toMatch(/at most 1 recording uploads of a tenant run at once \(FORKLINE_MAX_UPLOADS_PER_TENANT\)/);
    first.end();
    expect(await firstAnswer).toBe(201);
    // Once it has finished, the next one runs.
    const after = await upload(function* () {
      yield header;
    });
    expect(after.status).toBe(201);
  }, 60_000);
});
