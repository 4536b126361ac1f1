// The time the host keeps: lease heartbeats, sweeps, turn limits, waits
// between retries, WebSocket liveness. One interface, handed down from where
// the app is built (app.ts), so a test can pass a clock it moves itself
// (tests/helpers/fake-clock.ts) instead of waiting in real time. The core
// never reads it; it only names the seam. Leases expire by the database's
// clock (store/leases.ts): what runs here only decides when to renew them.

/** A scheduled callback; `unref` lets the process exit while it waits. */
export interface ClockTimer {
  unref(): unknown;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  setTimeout(fn: () => void, ms: number): ClockTimer;
  clearTimeout(timer: ClockTimer | undefined): void;
  setInterval(fn: () => void, ms: number): ClockTimer;
  clearInterval(timer: ClockTimer | undefined): void;
}

/** The real clock: Date.now and the runtime's timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (t) => clearTimeout(t as NodeJS.Timeout | undefined),
  setInterval: (fn, ms) => setInterval(fn, ms),
  clearInterval: (t) => clearInterval(t as NodeJS.Timeout | undefined),
};

/** Resolves after `ms` on `clock` (at once when `signal` aborts). */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clock.clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
