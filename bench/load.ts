// A small HTTP load generator (no autocannon here): `connections` keep-alive
// connections each posting the same body back to back for `ms` (or, with
// `{ get: paths }`, GETs of those paths in turn); requests/s and latency
// percentiles. Every answer must be a 200 whose body `check` accepts.
import fs from 'node:fs';
import http from 'node:http';
import { percentile, round } from './context.ts';

export interface LoadResult {
  requestsPerSec: number;
  /** Every request sent, warm-up and probe included (for CPU per request over the whole call). */
  requests: number;
  p50Ms: number;
  p99Ms: number;
}

export async function hammer(
  url: string,
  what: string | { get: string[] },
  opts: { connections: number; ms: number; check: (json: any) => boolean; headers?: Record<string, string> },
): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.connections });
  const target = new URL(url);
  const latencies: number[] = [];
  const body = typeof what === 'string' ? what : undefined;
  const paths = typeof what === 'string' ? [target.pathname] : what.get;
  let next = 0;
  const post = () =>
    new Promise<void>((resolve, reject) => {
      const started = performance.now();
      const req = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: paths[next++ % paths.length],
          method: body === undefined ? 'GET' : 'POST',
          agent,
          headers:
            body === undefined
              ? { ...opts.headers }
              : { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...opts.headers },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            latencies.push(performance.now() - started);
            if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 300)}`));
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  // Check one answer fully before measuring (and warm up).
  const probe = await (body === undefined
    ? fetch(new URL(paths[0], url), { headers: opts.headers })
    : fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...opts.headers }, body }));
  const json = await probe.json();
  if (!opts.check(json)) throw new Error(`unexpected answer from ${url}: ${JSON.stringify(json).slice(0, 300)}`);

  const warmUntil = performance.now() + 500;
  await Promise.all(
    Array.from({ length: opts.connections }, async () => {
      while (performance.now() < warmUntil) await post();
    }),
  );
  const warmed = latencies.length + 1;
  latencies.length = 0;
  const started = performance.now();
  const until = started + opts.ms;
  await Promise.all(
    Array.from({ length: opts.connections }, async () => {
      while (performance.now() < until) await post();
    }),
  );
  const elapsed = performance.now() - started;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    requests: warmed + latencies.length,
    requestsPerSec: round((latencies.length / elapsed) * 1000, 1),
    p50Ms: round(percentile(latencies, 50)),
    p99Ms: round(percentile(latencies, 99)),
  };
}

/** CPU seconds (user + system) a process has used, from /proc/<pid>/stat (clock ticks of 1/100 s). */
export function processCpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
