// Failed authentication attempts, throttled per client address:
// after `maxFailures` unknown or missing tokens from one address within
// `windowMs`, every credentialed request from it — HTTP, SSE, WebSocket
// `connection_init` — is refused with 429 until the window ends. A valid token
// is refused too while the address is blocked: answering it would tell a
// guesser which guess was right. Unlike the per-token buckets (rate-limit.ts),
// the keys come from the network, so the table is bounded.

/** The key of a client address: IPv4 as is (also when IPv4-mapped), IPv6 by its /64 (one host's usual share). */
export function addressKey(address: string): string {
  const v4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (v4) return v4[1];
  if (!address.includes(':')) return address;
  const [head, tail = ''] = address.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = address.includes('::') ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right] : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}

export interface AuthThrottleOptions {
  maxFailures: number;
  windowMs: number;
  /** Addresses remembered at once; past it, expired windows and then the oldest are forgotten. */
  maxAddresses?: number;
  now?: () => number;
}

export class AuthThrottle {
  private readonly windows = new Map<string, { failures: number; since: number }>();
  private readonly now: () => number;
  private readonly maxAddresses: number;

  constructor(private readonly opts: AuthThrottleOptions) {
    this.now = opts.now ?? (() => performance.now());
    this.maxAddresses = opts.maxAddresses ?? 10_000;
  }

  /** Seconds until `address` may try again; 0 when it may now. */
  blockedFor(address: string | undefined): number {
    const w = address === undefined ? undefined : this.windows.get(addressKey(address));
    if (!w || w.failures < this.opts.maxFailures) return 0;
    const left = w.since + this.opts.windowMs - this.now();
    return left > 0 ? left / 1000 : 0;
  }

  /** Records a failed attempt from `address`. */
  failed(address: string | undefined): void {
    if (address === undefined) return;
    const key = addressKey(address);
    const t = this.now();
    const w = this.windows.get(key);
    if (w && t - w.since < this.opts.windowMs) {
      w.failures++;
      return;
    }
    this.windows.delete(key); // re-inserted last: the Map's order is oldest window first
    if (this.windows.size >= this.maxAddresses) this.forgetOld(t);
    this.windows.set(key, { failures: 1, since: t });
  }

  private forgetOld(t: number) {
    for (const [key, w] of this.windows) if (t - w.since >= this.opts.windowMs) this.windows.delete(key);
    for (const key of this.windows.keys()) {
      if (this.windows.size < this.maxAddresses) break;
      this.windows.delete(key);
    }
  }
}

export const authThrottledMessage = (retryAfterSeconds: number) =>
  `too many failed authentication attempts from this address; retry in ${Math.ceil(retryAfterSeconds)} s`;
