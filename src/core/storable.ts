// What the log can hold (docs/contract.md#log: every payload is validated before it is
// written): text Postgres can store — no NUL (U+0000), no unpaired UTF-16
// surrogate — in JSON nested at most MAX_JSON_DEPTH deep (deeper values
// exhausted zod's stack: a 2,000-level plugin event crashed the import).
// Checked iteratively, so no value is too deep to be checked. Pure.

export const MAX_JSON_DEPTH = 64;

// isWellFormed: no unpaired surrogate (native, a few times faster than a \p{Cs} regex on every string of every append).
export const isStorableText = (s: string) => !s.includes('\u0000') && s.isWellFormed();

/**
 * Text from outside the log's rules (a model's answer, a tool's output) made
 * storable: each NUL and each unpaired surrogate becomes U+FFFD, as a UTF-8
 * decoder does with bytes it cannot read. Pairs are kept.
 */
export const toStorableText = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '\uFFFD') : s).toWellFormed();

/**
 * A key "__proto__" is data to JSON.parse and to Postgres, but zod's records and
 * JSON values drop it (a JavaScript object's "__proto__" is its prototype), so
 * an event carrying one was stored without it, silently: refused instead, at
 * every door, like any other payload the log cannot hold as sent.
 */
const PROTO_KEY = '__proto__';

/** Why `value` cannot be stored, or undefined when it can; `textOnly`: key names are not held to PROTO_KEY (text and depth are). */
export function unstorableReason(value: unknown, maxDepth = MAX_JSON_DEPTH, textOnly = false): string | undefined {
  // Two parallel stacks, not a stack of pairs: every append checks every value, and a pair per value was most of its garbage.
  const values: unknown[] = [value];
  const depths: number[] = [0];
  while (values.length) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) return 'text contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored';
    } else if (v && typeof v === 'object') {
      if (depth >= maxDepth) return `nested deeper than ${maxDepth} levels`;
      if (Array.isArray(v)) {
        for (const x of v) {
          values.push(x);
          depths.push(depth + 1);
        }
      } else {
        for (const k in v) {
          if (!Object.hasOwn(v, k)) continue;
          if (!isStorableText(k)) return 'a key contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored';
          if (k === PROTO_KEY && !textOnly) return `a key is "${PROTO_KEY}", which would not be kept (it names an object's prototype in JavaScript): rename it`;
          values.push((v as Record<string, unknown>)[k]);
          depths.push(depth + 1);
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
  // A "__proto__" key is left out, as the log's codec would leave it out (PROTO_KEY).
  return Object.fromEntries(
    Object.entries(value)
      .filter(([k]) => k !== PROTO_KEY)
      .map(([k, x]) => [toStorableText(k), toStorableJson(x, depth + 1)]),
  );
}
