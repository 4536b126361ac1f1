// What the log can hold (docs/contract.md#log: every payload is validated before it is
// written): text Postgres can store — no NUL (U+0000), no unpaired UTF-16
// surrogate — in JSON nested at most MAX_JSON_DEPTH deep (deeper values
// exhausted zod's stack: a 2,000-level plugin event crashed the import).
// Checked iteratively, so no value is too deep to be checked. Pure.

export const MAX_JSON_DEPTH = 64;

// In unicode mode \p{Cs} matches only unpaired surrogates.
export const isStorableText = (s: string) => !s.includes('\u0000') && !/\p{Cs}/u.test(s);

/**
 * Text from outside the log's rules (a model's answer, a tool's output) made
 * storable: each NUL and each unpaired surrogate becomes U+FFFD, as a UTF-8
 * decoder does with bytes it cannot read. Pairs are kept.
 */
// eslint-disable-next-line no-control-regex -- NUL is one of the two it replaces
export const toStorableText = (s: string) => s.replace(/[\u0000\p{Cs}]/gu, '\uFFFD');

/** Why `value` cannot be stored, or undefined when it can. */
export function unstorableReason(value: unknown, maxDepth = MAX_JSON_DEPTH): string | undefined {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) return 'text contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored';
    } else if (v && typeof v === 'object') {
      if (depth >= maxDepth) return `nested deeper than ${maxDepth} levels`;
      if (Array.isArray(v)) {
        for (const x of v) stack.push([x, depth + 1]);
      } else {
        for (const [k, x] of Object.entries(v)) {
          if (!isStorableText(k)) return 'a key contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored';
          stack.push([x, depth + 1]);
        }
      }
    }
  }
  return undefined;
}

/**
 * JSON from outside (a tool's whole result) made storable: text and keys as
 * toStorableText makes them, and anything nested deeper than MAX_JSON_DEPTH
 * kept as its JSON text at that depth, so what a server answers can never
 * make its call's events unwritable.
 */
export function toStorableJson(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return toStorableText(value);
  if (!value || typeof value !== 'object') return value;
  if (depth >= MAX_JSON_DEPTH - 1) {
    try {
      return toStorableText(JSON.stringify(value));
    } catch {
      return '[nested too deeply to keep]';
    }
  }
  if (Array.isArray(value)) return value.map((x) => toStorableJson(x, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, x]) => [toStorableText(k), toStorableJson(x, depth + 1)]));
}
