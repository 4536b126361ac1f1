import { describe, expect, it, vi } from 'vitest';
import {
  JSON_ENVELOPE_VALUES,
  MAX_JSON_DEPTH,
  MAX_JSON_TEXT_DEPTH,
  MAX_JSON_VALUES,
  isStorableText,
  jsonCharsPast,
  jsonTextPast,
  jsonTextRefusal,
  nestedTooDeep,
  toStorableJson,
  toStorableText,
  tooManyValues,
  unstorableReason,
} from '../../src/core/storable.ts';

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

  it('answers a flat object (no object or array among its values) as the walk does: its keys before its text, the bound, depth 0', () => {
    const flat = JSON.parse('{"a": "x\\u0000", "__proto__": 1, "b": 2}') as unknown;
    expect(unstorableReason(flat)).toMatch(/a key is "__proto__"/);
    expect(unstorableReason(flat, MAX_JSON_DEPTH, true)).toMatch(/text contains/);
    expect(unstorableReason({ a: 1, ['k\u0000']: 'x\ud800' })).toMatch(/a key contains/);
    expect(unstorableReason({ a: 1, b: 2, c: 3 }, MAX_JSON_DEPTH, false, 3)).toBe(tooManyValues(3));
    expect(unstorableReason({ a: 1, b: 2 }, MAX_JSON_DEPTH, false, 3)).toBeUndefined();
    expect(unstorableReason({ a: 1 }, 0)).toMatch(/nested deeper than 0/);
    expect(unstorableReason({ a: null, b: true, c: 'ok', d: 1.5 })).toBeUndefined();
    expect(unstorableReason({ a: 'x\ud800', b: { c: 1 } })).toMatch(/text contains/);
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

describe('values a payload holds', () => {
  it('counts every array item and object member, and stops at the first past the bound', () => {
    expect(unstorableReason([1, 2, 3], MAX_JSON_DEPTH, false, 4)).toBeUndefined(); // the array and its three items
    expect(unstorableReason([1, 2, 3, 4], MAX_JSON_DEPTH, false, 4)).toBe(tooManyValues(4));
    expect(unstorableReason({ a: { b: 1, c: [2] } }, MAX_JSON_DEPTH, false, 5)).toBeUndefined();
    expect(unstorableReason({ a: { b: 1, c: [2, 3] } }, MAX_JSON_DEPTH, false, 5)).toBe(tooManyValues(5));
    expect(unstorableReason(new Array(MAX_JSON_VALUES).fill(0))).toBe(tooManyValues(MAX_JSON_VALUES));
    expect(unstorableReason(new Array(MAX_JSON_VALUES - 1).fill(0))).toBeUndefined();
  });

  it('counts the values of JSON text before it is parsed, strings and escapes skipped', () => {
    const max = 10;
    const past = (text: string | Uint8Array, maxValues: number) => jsonTextPast(text, maxValues, Infinity);
    const values = (n: number) => JSON.stringify(new Array(n - 1).fill(0)).padEnd(2 * max, ' ');
    expect(past(values(10), max)).toBeUndefined();
    expect(past(values(11), max)).toBe('values');
    // Commas, brackets and escaped quotes inside a string are text, not values.
    const text = JSON.stringify({ s: '[{,,,,,,,,,,,,,,,,,,,,,\\",,,,,,,,,,,]}' });
    expect(past(text, max)).toBeUndefined();
    expect(past(JSON.stringify([text, text, text, 1, 2, 3, 4, 5, 6, 7, 8]), max)).toBe('values');
    // A string ending in a backslash closes at its quote; bytes count as the text does.
    const trailing = JSON.stringify(['a\\', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(past(trailing, max)).toBe('values');
    expect(past(new TextEncoder().encode(trailing), max)).toBe('values');
    expect(past(new TextEncoder().encode(text), max)).toBeUndefined();
    // A text shorter than two characters a value cannot hold more than the bound, and is not scanned.
    expect(jsonTextPast(',,,,,', 10, 10)).toBeUndefined();
  });

  it('skips a string of escaped quotes in one walk, not a search per quote (17 MiB of them took 0.26-0.29 s)', () => {
    // Escaped quotes and backslashes, a quote and commas inside strings: counted as the same text without them.
    const escaped = JSON.stringify(['\\"\\', 'a"b,c,]"', '\\', '"', 1]);
    const plain = JSON.stringify(['x', 'y', 'z', 'w', 1]);
    for (const max of [4, 5, 6, 7]) expect(jsonTextPast(escaped, max, 1), String(max)).toBe(jsonTextPast(plain, max, 1));
    expect(jsonTextPast(`["${'\\"'.repeat(20)}`, 100, 1)).toBeUndefined(); // unclosed: left to the parser
    // The work: searches for the next quote, once per string whatever its escaped quotes (before: one per quote).
    const typedArrays = Object.getPrototypeOf(Uint8Array.prototype) as Uint8Array;
    const searches = vi.spyOn(typedArrays, 'indexOf');
    try {
      expect(jsonTextPast(JSON.stringify(['"'.repeat(10_000), 1, 2, 3]), 4, 10)).toBe('values');
      expect(searches.mock.calls.length).toBeLessThan(10); // before: 10,001
    } finally {
      searches.mockRestore();
    }
  });

  it("counts an object's keys, each distinct one once, where a door bounds them: values, strings and repeats are not new keys", () => {
    const keys = (n: number, repeat = 1) =>
      JSON.stringify(Array.from({ length: repeat }, () => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, `v${i}`]))));
    expect(jsonTextPast(keys(10), 100, 10, 10)).toBeUndefined();
    expect(jsonTextPast(keys(11), 100, 10, 10)).toBe('keys');
    expect(jsonTextPast(keys(10, 50), 1000, 10, 10)).toBeUndefined(); // the same keys again
    expect(jsonTextPast(JSON.stringify(Array.from({ length: 50 }, (_, i) => `k${i}`)), 1000, 10, 10)).toBeUndefined(); // strings, not keys
    expect(jsonTextPast('[{"a" :1}, {"b"\n:2}, {"a":3}, {"c":{"d":[{"e":"f:"}]}}]', 100, 10, 4)).toBe('keys'); // whitespace before the colon
    expect(jsonTextPast('[{"a" :1}, {"b"\n:2}, {"a":3}, {"c":{"d":[{"e":"f:"}]}}]', 100, 10, 5)).toBeUndefined();
    // An escape counts apart from what it means: more keys, never fewer.
    expect(jsonTextPast('[{"a":1},{"\\u0061":2},{"a\\"":3}]', 100, 10, 2)).toBe('keys');
    // Without a bound of keys, none is tracked.
    expect(jsonTextPast(keys(100_000), 2_000_000, 10)).toBeUndefined();
  });

  it('finds JSON text nested past a depth before it is parsed: brackets in strings are text, closed levels are left', () => {
    const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
    expect(jsonTextPast(nested(10), 100, 10)).toBeUndefined();
    expect(jsonTextPast(nested(11), 100, 10)).toBe('depth');
    expect(jsonTextPast(`{"a":${nested(9)}}`, 100, 10)).toBeUndefined();
    expect(jsonTextPast(`{"a":${nested(10)}}`, 100, 10)).toBe('depth');
    // Many levels side by side are as deep as one.
    expect(jsonTextPast(`[${new Array(50).fill(nested(9)).join(',')}]`, 1000, 10)).toBeUndefined();
    expect(jsonTextPast(JSON.stringify(['[[[[[[[[[[[[[[[[{{{{{{{{{{{{{']), 100, 10)).toBeUndefined();
    expect(jsonTextPast(new TextEncoder().encode(`["é",${nested(11)}]`), 100, 11)).toBe('depth');
    // The values are counted on the way: past either bound, the first one reached.
    expect(jsonTextPast(nested(11), 5, 10)).toBe('values');
  });

  it('refuses text at every door with words saying what, the bound and what to do', () => {
    const deep = '['.repeat(MAX_JSON_TEXT_DEPTH + 1) + ']'.repeat(MAX_JSON_TEXT_DEPTH + 1);
    expect(jsonTextRefusal(deep)).toEqual({ past: 'depth', reason: nestedTooDeep(MAX_JSON_TEXT_DEPTH) });
    expect(nestedTooDeep(MAX_JSON_TEXT_DEPTH)).toBe(
      "nests arrays and objects more than 256 levels deep (an event's data may nest at most 64): send flatter JSON",
    );
    expect(jsonTextRefusal(`{"a":${deep.slice(2, -2)}}`)).toBeUndefined();
    expect(jsonTextRefusal(JSON.stringify(new Array(MAX_JSON_VALUES + JSON_ENVELOPE_VALUES).fill(0)))).toEqual({
      past: 'values',
      reason: tooManyValues(MAX_JSON_VALUES),
    });
  });
});

describe('jsonCharsPast', () => {
  it("counts strings' and keys' characters and one for each value, about its JSON text's length", () => {
    const value = { query: 'x'.repeat(90), variables: { id: 'abc', list: [1, 2, 3] } };
    // 8 values, the keys (query 5, variables 9, id 2, list 4) each plus one, the strings (90, 3), and the list's length.
    const chars = 8 + (6 + 10 + 3 + 5) + (90 + 3) + 3;
    expect(jsonCharsPast(value, chars)).toBe(false);
    expect(jsonCharsPast(value, chars - 1)).toBe(true);
    expect(jsonCharsPast(undefined, 1)).toBe(false);
  });

  it('walks any depth, and stops once past the bound (a million values past a bound of 10: at once)', () => {
    let deep: unknown = 0;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(jsonCharsPast(deep, 1_000_000)).toBe(false);
    expect(jsonCharsPast(deep, 100)).toBe(true);
    // Its items counted as they are read: the walk stops at the list's length, before any of them.
    let itemsRead = 0;
    const wide = new Proxy(new Array(1_000_000).fill('x'), {
      get: (target, key, receiver) => {
        if (typeof key === 'string' && /^\d+$/.test(key)) itemsRead++;
        return Reflect.get(target, key, receiver);
      },
    });
    expect(jsonCharsPast([wide], 10)).toBe(true);
    expect(itemsRead).toBe(0);
  });
});
