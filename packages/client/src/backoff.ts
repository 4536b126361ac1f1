// The one backoff of the @forkline packages (the client's retries, the runner
// SDK's retries, resubscriptions and claims after failures): how long to wait
// before the next attempt of something that failed for a reason that may pass.
// Pure: callers wait with their own timer.

export interface BackoffOptions {
  /** The first wait. */
  initialMs: number;
  /** No wait is longer than this. */
  maxMs: number;
  /** Each wait is this many times the one before (default 2). */
  factor?: number;
  /** 0..1: a wait is shortened by up to this share, at random (waiters that failed together do not retry together). Default 0. */
  jitter?: number;
  random?: () => number;
}

/** Waits that grow from `initialMs` to `maxMs`; `reset` after a success starts again from the first. */
export class Backoff {
  private attempt = 0;

  constructor(private readonly opts: BackoffOptions) {}

  /** The wait before the next attempt (and counts it); a wait the server asked for (`retryAfterMs`) wins. */
  next(retryAfterMs?: number): number {
    const wait = backoffDelay(this.attempt++, this.opts);
    return retryAfterMs !== undefined && retryAfterMs > 0 ? retryAfterMs : wait;
  }

  reset(): void {
    this.attempt = 0;
  }
}

/** The wait after failed attempt `attempt` (0: the first failure). */
export function backoffDelay(attempt: number, { initialMs, maxMs, factor = 2, jitter = 0, random = Math.random }: BackoffOptions): number {
  const full = Math.min(maxMs, initialMs * factor ** Math.max(0, attempt));
  return jitter > 0 ? Math.round(full * (1 - jitter * random())) : full;
}

/** Waits `ms`; an abort ends the wait early (without throwing). */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}
