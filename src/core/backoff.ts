// The one backoff of the codebase: how long to wait before the next attempt of
// something that failed for a reason that may pass (a provider's 429 or 5xx, a
// lost database connection). Pure: callers wait with their own timer, and
// pass `random` when they want jitter.

export interface BackoffOptions {
  /** The first wait. */
  initialMs: number;
  /** No wait is longer than this. */
  maxMs: number;
  /** Each wait is this many times the one before (default 2). */
  factor?: number;
  /** 0..1: a wait is shortened by up to this share, at random (several waiters do not retry in step). Default 0. */
  jitter?: number;
  random?: () => number;
}

/** Waits that grow from `initialMs` to `maxMs`; `reset` after a success starts again from the first. */
export class Backoff {
  private attempt = 0;

  constructor(private readonly opts: BackoffOptions) {}

  /** The wait before the next attempt (and counts it). */
  next(): number {
    return backoffDelay(this.attempt++, this.opts);
  }

  reset(): void {
    this.attempt = 0;
  }

  /** Waits counted since the last reset. */
  get attempts(): number {
    return this.attempt;
  }
}

/** The wait after failed attempt `attempt` (0: the first failure). */
export function backoffDelay(attempt: number, { initialMs, maxMs, factor = 2, jitter = 0, random = Math.random }: BackoffOptions): number {
  const full = Math.min(maxMs, initialMs * factor ** Math.max(0, attempt));
  return jitter > 0 ? Math.round(full * (1 - jitter * random())) : full;
}

/**
 * The wait a server asks for in its answer's headers: `retry-after-ms`
 * (OpenAI's) or `retry-after` (seconds, or an HTTP date read against `now`).
 * Undefined when it names none or one that cannot be read.
 */
export function retryAfterMs(headers: Record<string, string | undefined> | undefined, now: number): number | undefined {
  if (!headers) return undefined;
  const get = (name: string) =>
    Object.entries(headers)
      .find(([k]) => k.toLowerCase() === name)?.[1]
      ?.trim();
  const ms = get('retry-after-ms');
  if (ms && /^\d+(\.\d+)?$/.test(ms)) return Math.round(Number(ms));
  const after = get('retry-after');
  if (!after) return undefined;
  if (/^\d+(\.\d+)?$/.test(after)) return Math.round(Number(after) * 1000);
  const at = Date.parse(after);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
