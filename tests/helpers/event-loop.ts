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
