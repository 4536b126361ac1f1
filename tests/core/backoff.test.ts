import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelay, retryAfterMs } from '../../src/core/backoff.ts';

describe('backoff', () => {
  it('doubles from the first wait up to the cap, and starts again after a reset', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 500 });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([100, 200, 400, 500, 500]);
    expect(b.attempts).toBe(5);
    b.reset();
    expect(b.next()).toBe(100);
  });

  it('jitter shortens a wait by up to its share', () => {
    expect(backoffDelay(2, { initialMs: 100, maxMs: 10_000, jitter: 0.5, random: () => 1 })).toBe(200);
    expect(backoffDelay(2, { initialMs: 100, maxMs: 10_000, jitter: 0.5, random: () => 0 })).toBe(400);
    expect(backoffDelay(0, { initialMs: 100, maxMs: 10_000, factor: 3 })).toBe(100);
    expect(backoffDelay(2, { initialMs: 100, maxMs: 10_000, factor: 3 })).toBe(900);
  });

  it('reads the wait a server asks for: retry-after-ms first, then retry-after in seconds or as an HTTP date', () => {
    const now = Date.parse('2026-12-04T12:00:00Z');
    expect(retryAfterMs({ 'retry-after-ms': '250', 'retry-after': '9' }, now)).toBe(250);
    expect(retryAfterMs({ 'Retry-After': '2' }, now)).toBe(2000);
    expect(retryAfterMs({ 'retry-after': '1.5' }, now)).toBe(1500);
    expect(retryAfterMs({ 'retry-after': 'Fri, 04 Dec 2026 12:00:03 GMT' }, now)).toBe(3000);
    expect(retryAfterMs({ 'retry-after': 'Fri, 04 Dec 2026 11:00:00 GMT' }, now)).toBe(0);
    expect(retryAfterMs({ 'retry-after': 'soon' }, now)).toBeUndefined();
    expect(retryAfterMs({}, now)).toBeUndefined();
    expect(retryAfterMs(undefined, now)).toBeUndefined();
  });
});
