// Watching a real service process while a test attacks it: its resident set
// sampled every 50 ms, and /healthz timed (one request at a time, every
// 100 ms), so a test can bound both what an attack made the process hold and
// how long it stopped answering.
import fs from 'node:fs';

export interface Watched<T> {
  result: T;
  /** RSS at its highest (or after) minus before, in MB. */
  growthMB: number;
  /** The slowest /healthz answer meanwhile, in ms. */
  slowestHealthzMs: number;
}

/** Runs `fn` while watching the process `pid` serving at `base`. */
export async function underWatch<T>(pid: number, base: string, fn: () => Promise<T>): Promise<Watched<T>> {
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
  const beforeMB = rss();
  let peakMB = beforeMB;
  const sampler = setInterval(() => (peakMB = Math.max(peakMB, rss())), 50);
  let slowest = 0;
  let stop = false;
  const healthz = (async () => {
    while (!stop) {
      const t0 = performance.now();
      await (await fetch(`${base}/healthz`)).arrayBuffer();
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
