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
  it('a take that a reservation would cut waits for it to settle, then gets what the reservation did not use; the total holds', async () => {
    const b = new TextBudget(10);
    const reserved = await b.reserveAll();
    expect(reserved).toBe(10);
    let took: number | undefined;
    const waiting = b.takeSettled(4).then((n) => (took = n));
    const second = b.reserveAll();
    await Promise.resolve();
    expect(took).toBeUndefined(); // the old budget gave it 0 here: the text came cut
    b.settle(reserved, 3);
    await waiting;
    expect(took).toBe(4);
    // The next reservation gets what is left, after the first settled.
    expect(await second).toBe(3);
    b.settle(3, 3);
    expect(await b.takeSettled(5)).toBe(0);
  });
  it('a reservation that used nothing leaves all it held', async () => {
    const b = new TextBudget(10);
    expect(b.take(4)).toBe(4);
    const reserved = await b.reserveAll();
    b.settle(reserved, 0);
    expect(await b.takeSettled(6)).toBe(6);
  });
});
