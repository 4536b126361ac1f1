// What a piece of work cost the process: the longest stall of its event loop
// (every other request waited that long), its CPU time and its wall time.
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** The longest the event loop was held while `work` ran, the CPU time the process spent meanwhile, and how long it took, in ms. */
export async function spent<T>(work: () => Promise<T>): Promise<{ result: T; stallMs: number; cpuMs: number; ms: number }> {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const cpu = process.cpuUsage();
  const started = performance.now();
  delay.enable();
  try {
    const result = await work();
    const used = process.cpuUsage(cpu);
    return { result, stallMs: delay.max / 1e6, cpuMs: (used.user + used.system) / 1000, ms: performance.now() - started };
  } finally {
    delay.disable();
  }
}

/**
 * What another client may wait (servedMeanwhile) while one hostile request is handled: several times the longest a
 * loaded 2-core machine showed (1.1-1.5 s, a /chat body of 100,000 messages refused, with the whole suite beside it).
 */
export const WAIT_BOUND_MS = 5000;

/**
 * `spent(work)`, while a small request (GET /healthz) is sent again and again, each when the one before is
 * answered: `waitedMs` is the longest any of them took — what another client of the process waited meanwhile.
 */
export async function servedMeanwhile<T>(
  appUrl: string,
  work: () => Promise<T>,
): Promise<{ result: T; stallMs: number; cpuMs: number; ms: number; waitedMs: number; probes: number }> {
  const probe = new URL('/healthz', appUrl);
  let done = false;
  let waitedMs = 0;
  let probes = 0;
  const probing = (async () => {
    while (!done) {
      const started = performance.now();
      await (await fetch(probe)).arrayBuffer();
      waitedMs = Math.max(waitedMs, performance.now() - started);
      probes++;
    }
  })();
  const measured = await spent(async () => {
    try {
      return await work();
    } finally {
      done = true;
    }
  });
  await probing;
  return { ...measured, waitedMs, probes };
}
