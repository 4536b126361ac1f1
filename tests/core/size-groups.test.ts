// groupsBySize: consecutive groups, in order, each within the bound unless one item alone is larger.
import { describe, expect, it } from 'vitest';
import { groupsBySize } from '../../src/core/size-groups.ts';

const sized = (...bytes: number[]) => bytes.map((b, i) => ({ item: `i${i}:${b}`, bytes: b }));

describe('groupsBySize', () => {
  it('fills each group up to the bound, in order', () => {
    expect(groupsBySize(sized(4, 4, 2, 5, 5), 10)).toEqual([
      ['i0:4', 'i1:4', 'i2:2'],
      ['i3:5', 'i4:5'],
    ]);
  });
  it('puts an item larger than the bound alone, and starts the next group after it', () => {
    expect(groupsBySize(sized(3, 25, 3, 3), 10)).toEqual([['i0:3'], ['i1:25'], ['i2:3', 'i3:3']]);
  });
  it('makes no group of nothing', () => {
    expect(groupsBySize([], 10)).toEqual([]);
  });
});
