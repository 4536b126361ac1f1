// How the dashboard writes durations: a turn's, a span's, a session's time in turns.
import { describe, expect, it } from 'vitest';
import { formatDuration } from '../../client/dashboard/src/format.ts';

describe('formatDuration', () => {
  it('writes milliseconds, seconds and minutes', () => {
    expect(formatDuration(0)).toBe('0 ms');
    expect(formatDuration(999)).toBe('999 ms');
    expect(formatDuration(1_000)).toBe('1.0 s');
    expect(formatDuration(59_900)).toBe('59.9 s');
    expect(formatDuration(61_000)).toBe('1 min 1 s');
  });

  it('rounds once: never `1 min 60 s`', () => {
    expect(formatDuration(119_600)).toBe('2 min 0 s');
    expect(formatDuration(3_599_600)).toBe('1 h 0 min');
  });

  it('writes hours and days rather than thousands of minutes', () => {
    expect(formatDuration(2_450 * 60_000 + 49_000)).toBe('1 d 17 h');
    expect(formatDuration(90 * 60_000)).toBe('1 h 30 min');
    expect(formatDuration(23 * 3_600_000 + 59 * 60_000)).toBe('23 h 59 min');
    expect(formatDuration(45_679 * 60_000)).toBe('31 d 17 h');
  });
});
