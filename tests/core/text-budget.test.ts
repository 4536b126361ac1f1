import { describe, expect, it } from 'vitest';
import { TextBudget } from '../../src/core/text-budget.ts';

describe('TextBudget', () => {
  it('gives each text what is left of the total, then nothing', () => {
    const b = new TextBudget(10);
    expect([b.take(4), b.take(0), b.take(5), b.take(3), b.take(2)]).toEqual([4, 0, 5, 1, 0]);
  });
  it('never gives a negative length', () => {
    expect(new TextBudget(-5).take(3)).toBe(0);
    expect(new TextBudget(5).take(-3)).toBe(0);
  });
});
