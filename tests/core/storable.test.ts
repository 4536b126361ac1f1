import { describe, expect, it } from 'vitest';
import { isStorableText, toStorableJson, toStorableText, unstorableReason } from '../../src/core/storable.ts';

describe('storable text', () => {
  it('refuses NUL and unpaired surrogates, keeps pairs', () => {
    expect(isStorableText('plain 😀')).toBe(true);
    expect(isStorableText('a\u0000b')).toBe(false);
    expect(isStorableText('a\ud800b')).toBe(false);
    expect(isStorableText('a\udc00')).toBe(false);
  });

  it('replaces each NUL and unpaired surrogate with U+FFFD', () => {
    expect(toStorableText('a\u0000b\ud800c\udc00d😀\u0000')).toBe('a\uFFFDb\uFFFDc\uFFFDd😀\uFFFD');
    expect(toStorableText('clean')).toBe('clean');
  });

  it('finds unstorable text in nested values and keys, and depth past the limit', () => {
    expect(unstorableReason({ a: [1, { b: 'ok', c: [true, null] }] })).toBeUndefined();
    expect(unstorableReason({ a: [1, { b: 'x\ud800' }] })).toMatch(/text contains/);
    expect(unstorableReason({ a: { ['k\u0000']: 1 } })).toMatch(/a key contains/);
    let deep: unknown = 'leaf';
    for (let i = 0; i < 10; i++) deep = [deep];
    expect(unstorableReason(deep, 10)).toBeUndefined();
    expect(unstorableReason([deep], 10)).toMatch(/nested deeper than 10/);
  });

  it('checks own keys only', () => {
    const proto = { ['bad\u0000']: 'x\ud800' };
    expect(unstorableReason(Object.create(proto) as object)).toBeUndefined();
  });

  it('refuses a "__proto__" key at any depth (the codec would drop it), unless only text is checked; toStorableJson leaves it out', () => {
    const data = JSON.parse('{"a": [{"__proto__": {"x": 1}, "b": 2}]}') as unknown;
    expect(unstorableReason(data)).toMatch(/a key is "__proto__"/);
    expect(unstorableReason(data, Infinity, true)).toBeUndefined();
    expect(unstorableReason({ constructor: { prototype: 1 } })).toBeUndefined();
    const kept = toStorableJson(data);
    expect(JSON.stringify(kept)).toBe('{"a":[{"b":2}]}');
    expect(Object.getPrototypeOf((kept as { a: object[] }).a[0])).toBe(Object.prototype);
  });
});
