// eventPagesCache: history as cacheable pages. GET /sessions/<id>/events pages
// (100 events each, the first 100 pages of a 20,000-event log: all final, so
// immutable) served straight from forkline and through nginx from Debian as a
// caching proxy in front of it (warm: every page fetched once before
// measuring). Pages/s each way, and forkline's CPU per page (its process's
// user + system time over the run, /proc) — behind a warm cache it serves
// nothing. nginx (`nginx-light`) is installed with apt when missing.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { QUICK, round, type BenchContext } from './context.ts';
import { createLongSession } from './long-session.ts';
import { hammer, processCpuSeconds } from './load.ts';
import { startProcess, stop } from './read-throughput.ts';
import { ensureAptPackage } from '../scripts/apt-package.mjs';

const NGINX = '/usr/sbin/nginx';
const CONNECTIONS = 8;
const PAGES = 100;
const PAGE = 100;

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
    s.once('error', reject);
  });

/** nginx as a caching proxy in front of `upstream` (host:port), in its own folder; resolves once it answers. */
async function startNginx(upstream: string): Promise<{ url: string; child: ChildProcess; dir: string }> {
  if (!ensureAptPackage({ binary: NGINX, pkg: 'nginx-light', what: 'the eventPagesCache bench' }))
    throw new Error('nginx is missing (apt-get install nginx-light)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-nginx-'));
  fs.chmodSync(dir, 0o777); // nginx's workers run as nobody when started by root
  const port = await freePort();
  const conf = path.join(dir, 'nginx.conf');
  fs.writeFileSync(
    conf,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=pages:10m max_size=1g inactive=1h use_temp_path=off;
  upstream forkline { server ${upstream}; keepalive 16; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://forkline;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host; # local mode answers loopback Hosts only
      proxy_cache pages;
      proxy_cache_revalidate on;
      proxy_cache_lock on;
      add_header X-Cache-Status $upstream_cache_status;
    }
  }
}
`,
  );
  const child = spawn(NGINX, ['-c', conf, '-p', dir], { stdio: ['ignore', 'inherit', 'inherit'] });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${fs.readFileSync(path.join(dir, 'error.log'), 'utf8').slice(-800)}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, child, dir };
    if (i > 100) throw new Error('nginx did not answer in 10 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function benchEventPagesCache(ctx: BenchContext) {
  const ms = QUICK ? 2000 : 5000;
  const long = await createLongSession(ctx, 20_000);
  const paths = Array.from({ length: PAGES }, (_, k) => `/sessions/${long.id}/events?after=${k * PAGE - 1}&first=${PAGE}`);
  const check = (j: any) => j.data?.session?.events?.edges?.length === PAGE;

  const forkline = await startProcess(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(new URL('../src/main.ts', import.meta.url))],
    { DATABASE_URL: ctx.databaseUrl, PORT: '0' },
    /"url":"([^"]+)"/,
  );
  const origin = new URL(forkline.url).origin;
  const nginx = await startNginx(new URL(forkline.url).host);
  try {
    const probe = async (base: string) => {
      const res = await fetch(base + paths[0]);
      await res.arrayBuffer();
      return { status: res.status, cache: res.headers.get('cache-control'), hit: res.headers.get('x-cache-status') };
    };
    const first = await probe(nginx.url);
    if (!/immutable/.test(first.cache ?? '')) throw new Error(`page not final: ${JSON.stringify(first)}`);
    for (const p of paths) await (await fetch(nginx.url + p)).arrayBuffer(); // warm the cache
    const warm = await probe(nginx.url);
    if (warm.hit !== 'HIT') throw new Error(`nginx did not answer from its cache: ${JSON.stringify(warm)}`);

    const measure = async (base: string) => {
      const before = processCpuSeconds(forkline.child.pid!);
      const r = await hammer(base + '/', { get: paths }, { connections: CONNECTIONS, ms, check });
      const cpu = processCpuSeconds(forkline.child.pid!) - before;
      return { ...r, cpuMsPerPage: round((cpu * 1000) / r.requests, 3) };
    };
    // Alternating runs, best of two: the machine may be busy with other work.
    const best: Record<'direct' | 'cached', Awaited<ReturnType<typeof measure>> | undefined> = { direct: undefined, cached: undefined };
    for (let i = 0; i < 2; i++) {
      for (const [name, base] of [
        ['direct', origin],
        ['cached', nginx.url],
      ] as const) {
        const r = await measure(base);
        if (!best[name] || r.requestsPerSec > best[name].requestsPerSec) best[name] = r;
      }
    }
    const { direct, cached } = best as Record<'direct' | 'cached', Awaited<ReturnType<typeof measure>>>;
    return {
      connections: CONNECTIONS,
      seconds: ms / 1000,
      pages: `${PAGES} pages of ${PAGE} events`,
      direct: `${direct.requestsPerSec} pages/s, p50 ${direct.p50Ms} ms, p99 ${direct.p99Ms} ms, forkline CPU ${direct.cpuMsPerPage} ms/page`,
      nginxWarm: `${cached.requestsPerSec} pages/s, p50 ${cached.p50Ms} ms, p99 ${cached.p99Ms} ms, forkline CPU ${cached.cpuMsPerPage} ms/page`,
      cachedToDirect: round(cached.requestsPerSec / direct.requestsPerSec),
    };
  } finally {
    await Promise.all([stop(forkline.child), stop(nginx.child)]);
    fs.rmSync(nginx.dir, { recursive: true, force: true });
  }
}
