// Per-token rate limiting: one token bucket per API token (auth mode), shared
// by HTTP requests and WebSocket operations of that token. Keys are configured
// tokens only, so the table cannot grow without bound.

export class TokenBuckets {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    readonly perSecond: number,
    readonly burst: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Takes one token; returns 0 when allowed, else the seconds until one is available. */
  take(key: string): number {
    const t = this.now();
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: t };
    b.tokens = Math.min(this.burst, b.tokens + ((t - b.at) / 1000) * this.perSecond);
    b.at = t;
    this.buckets.set(key, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return (1 - b.tokens) / this.perSecond;
  }
}

export const rateLimitedMessage = (retryAfterSeconds: number) => `rate limit exceeded for this API token; retry in ${Math.ceil(retryAfterSeconds)} s`;
