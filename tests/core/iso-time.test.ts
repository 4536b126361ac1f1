// isoTime (core/iso-time.ts) writes exactly what toISOString writes, whatever
// order dates come in (its kept second must never leak into another date).
import { describe, expect, it } from 'vitest';
import { isoTime } from '../../src/core/iso-time.ts';

describe('isoTime', () => {
  it('is toISOString for dates in any order, across seconds, days, years and the edges of its range', () => {
    const base = Date.UTC(2026, 11, 5, 3, 51, 54, 264);
    const times = [
      base,
      base + 1,
      base + 735,
      base + 736, // the next second
      base - 265, // the previous one
      base,
      base + 86_400_000,
      base - 1000 * 3600 * 24 * 365 * 30,
      0,
      999,
      1000,
      -1,
      -1001,
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
      Date.UTC(10000, 0, 1),
      Date.UTC(-5, 0, 1),
      8.64e15,
      -8.64e15,
    ];
    let seed = 7;
    for (let i = 0; i < 2000; i++) {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      // Runs of dates in one second, and jumps anywhere from 1970 to 2100.
      times.push(i % 5 ? times[times.length - 1] + (seed % 400) : seed * 2000 + (seed % 1000));
    }
    for (const t of times) expect(isoTime(new Date(t)), String(t)).toBe(new Date(t).toISOString());
  });

  it('throws the RangeError toISOString throws for an invalid date', () => {
    expect(() => new Date(Number.NaN).toISOString()).toThrow(RangeError);
    expect(() => isoTime(new Date(Number.NaN))).toThrow(RangeError);
  });
});
