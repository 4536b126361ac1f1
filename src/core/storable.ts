// What the log can hold (docs/contract.md#log: every payload is validated before it is
// written): text Postgres can store — no NUL (U+0000), no unpaired UTF-16
// surrogate — in JSON nested at most MAX_JSON_DEPTH deep (deeper values
// exhausted zod's stack: a 2,000-level plugin event crashed the import).
// Checked iteratively, so no value is too deep to be checked. Pure.

export const MAX_JSON_DEPTH = 64;
/**
 * The most values (strings, numbers, objects, arrays… each one) one payload may hold: what checking, decoding and
 * writing it costs grows with its values, not its bytes, and 16 MiB of `[0,0,0,…]` is 8 million of them — an
 * import's line of 7 million held the event loop for 7 s (docs/operations.md "Memory and time", "Event-loop time").
 */
export const MAX_JSON_VALUES = 1_000_000;
/** Why a payload past MAX_JSON_VALUES is refused (checked before any other walk of it). */
export const tooManyValues = (max: number) => `holds more than ${max} JSON values (strings, numbers, objects, arrays: each counts)`;

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

/** Values a JSON text may hold besides its payloads' (a request's query and names, an event line's envelope). */
export const JSON_ENVELOPE_VALUES = 100;

/**
 * The deepest JSON text from outside may nest, the whole of it (a request body, a recording line, a graphql-ws
 * message), checked on its text before anything parses it: a body of a million nested arrays (2 MB, within
 * MAX_JSON_VALUES) held the event loop 0.7–0.9 s to be parsed twice and refused. 256: a payload nests at most
 * MAX_JSON_DEPTH, and a request wraps it in a few levels (variables, input, a list of events, an event, a batch):
 * four times what any stored value needs. Variables not stored as payloads (model settings, 16 KiB of JSON) are
 * providers' options, which nest a few levels (docs/operations.md "Event-loop time").
 */
export const MAX_JSON_TEXT_DEPTH = 256;
/**
 * The distinct object keys JSON text from outside may hold at every door (a GraphQL body or parameter, a graphql-ws
 * message, a recording line; the chat doors hold fewer: FORKLINE_MAX_REQUEST_KEYS), counted before it is parsed.
 * JSON.parse pays 2-3.5 µs for each new key: a GraphQL body of 500,000 held the loop 0.9 s, a recording line 1.6 s.
 * Real events repeat a few dozen keys (a recording of a session with tools: 23-31); what else a tool's output adds
 * is its own, and 100,000 (0.2-0.4 s) leaves it thousands of times that (docs/operations.md "Event-loop time").
 */
export const MAX_JSON_KEYS = 100_000;
/** Distinct keys JSON text may hold besides its payload's (a recording line's envelope, a request's variables). */
const JSON_ENVELOPE_KEYS = 100;
/**
 * The distinct object keys one payload may hold: what every door's text may hold less its envelope, so a payload one
 * door takes (the store's append, which forkline's own agent writes through) every other door takes too, and its
 * recording line imports again (docs/operations.md "Event-loop time").
 */
export const MAX_PAYLOAD_KEYS = MAX_JSON_KEYS - JSON_ENVELOPE_KEYS;
/** Why JSON text nested past MAX_JSON_TEXT_DEPTH is refused: what, the bound, what to do. */
export const nestedTooDeep = (max: number) =>
  `nests arrays and objects more than ${max} levels deep (an event's data may nest at most ${MAX_JSON_DEPTH}): send flatter JSON`;

/**
 * What JSON text holds past the bounds, found before anything parses it: 'values' when more than `maxValues` (a
 * comma outside strings begins one, and so does an opening bracket or brace that is not closed at once: the count of
 * unstorableReason), 'depth' when its arrays and objects nest
 * more than `maxDepth` deep, 'keys' when its objects' keys are more than `maxKeys` distinct ones (JSON.parse makes
 * each new key a property name and a hidden class of its own: 249,000 distinct keys, 2.9 MB, took 0.5 s to parse,
 * 0.8–0.9 s when 40 characters long; a key met again costs little). JSON.parse of 16 MiB of `[0,0,…]` builds 8 million values, and the checks and
 * collections that follow took seconds; 2 MB of `[[[…]]]` is a million levels. A text too short to hold either is
 * not scanned (each value takes a character and a separator, each level a bracket). Scanned as UTF-8 bytes (the
 * characters counted are ASCII, which no other character's bytes contain), a string skipped to its closing quote by
 * indexOf (or walked, when it holds an escaped quote): a 16 MiB string costs a millisecond, 16 MiB of values, spaces
 * or escapes 0.01–0.17 s. Malformed text is left to the parser.
 */
export function jsonTextPast(text: string | Uint8Array, maxValues: number, maxDepth: number, maxKeys = Infinity): 'values' | 'depth' | 'keys' | undefined {
  if (text.length < 2 * maxValues && text.length <= maxDepth && text.length <= 3 * maxKeys) return undefined;
  const bytes = typeof text === 'string' ? new TextEncoder().encode(text) : text;
  // Each distinct key takes 3 bytes at least (its quotes and colon): a shorter text is not counted.
  const keys = bytes.length <= 3 * maxKeys ? undefined : new DistinctKeys(bytes);
  let values = 1;
  let depth = 0;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i];
    if (c === QUOTE) {
      const start = i;
      // To the closing quote: found by indexOf when the next quote follows no backslash; else the string's bytes are
      // walked, each backslash skipping the byte after it (indexOf from each escaped quote to the next cost a call
      // per quote: 17 MiB of \" took 0.26–0.29 s, walked 0.02–0.04 s).
      const end = bytes.indexOf(QUOTE, i + 1);
      if (end < 0) return undefined;
      if (bytes[end - 1] !== BACKSLASH) i = end;
      else {
        let j = i + 1;
        while (j < bytes.length && bytes[j] !== QUOTE) j += bytes[j] === BACKSLASH ? 2 : 1;
        if (j >= bytes.length) return undefined;
        i = j;
      }
      if (keys && keyFollows(bytes, i + 1) && keys.add(start + 1, i) > maxKeys) return 'keys';
    } else if (c === COMMA) {
      if (++values > maxValues) return 'values';
    } else if (c === OPEN_BRACKET || c === OPEN_BRACE) {
      // It begins its first value, unless it holds none: an empty array or object is one value, as unstorableReason counts it.
      if (!closesNext(bytes, i + 1) && ++values > maxValues) return 'values';
      if (++depth > maxDepth) return 'depth';
    } else if (c === CLOSE_BRACKET || c === CLOSE_BRACE) depth--;
  }
  return undefined;
}
const [QUOTE, BACKSLASH, COMMA, OPEN_BRACKET, OPEN_BRACE, CLOSE_BRACKET, CLOSE_BRACE, COLON] = [0x22, 0x5c, 0x2c, 0x5b, 0x7b, 0x5d, 0x7d, 0x3a];
/** Whether a closing bracket or brace follows at `i`, after JSON's whitespace: the one before it holds nothing. */
function closesNext(bytes: Uint8Array, i: number): boolean {
  while (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09) i++;
  return bytes[i] === CLOSE_BRACKET || bytes[i] === CLOSE_BRACE;
}
/** Whether a colon follows at `i`, after JSON's whitespace: the string before it was an object's key. */
function keyFollows(bytes: Uint8Array, i: number): boolean {
  while (bytes[i] === 0x20 || bytes[i] === 0x0a || bytes[i] === 0x0d || bytes[i] === 0x09) i++;
  return bytes[i] === COLON;
}

/**
 * The distinct keys of JSON text, as its bytes spell them (an escape counts apart from what it means: this can only
 * count more keys than JSON.parse sees), without making a string of each: a hash of its bytes (FNV-1a), and the keys
 * met under each hash compared byte by byte. A hash holds 8 keys: past them each key under it counts as new, so
 * colliding keys chosen by a sender are counted more, never fewer, and cost no more than 8 comparisons each.
 */
class DistinctKeys {
  private readonly spans = new Map<number, number[]>();
  private count = 0;
  constructor(private readonly bytes: Uint8Array) {}

  /** Adds the key at bytes [start, end): the distinct keys so far. */
  add(start: number, end: number): number {
    const { bytes } = this;
    let hash = 0x811c9dc5;
    for (let k = start; k < end; k++) hash = Math.imul(hash ^ bytes[k], 0x01000193);
    const met = this.spans.get(hash);
    if (!met) this.spans.set(hash, [start, end]);
    else {
      for (let j = 0; j < met.length; j += 2) if (sameBytes(bytes, met[j], met[j + 1], start, end)) return this.count;
      if (met.length < 16) met.push(start, end);
    }
    return ++this.count;
  }
}
function sameBytes(bytes: Uint8Array, a: number, aEnd: number, b: number, bEnd: number): boolean {
  if (aEnd - a !== bEnd - b) return false;
  while (a < aEnd) if (bytes[a++] !== bytes[b++]) return false;
  return true;
}

/**
 * Why JSON text from outside is refused before it is parsed, at every door (request bodies, recording lines,
 * graphql-ws messages): past `maxValues` (MAX_JSON_VALUES, or a door's own lower bound: the chat doors',
 * core/resent-conversation.ts), with a request's envelope, past MAX_JSON_TEXT_DEPTH, or past `maxKeys` (MAX_JSON_KEYS,
 * or a door's own lower bound). `reason` follows what the door
 * calls the text ("the request body …").
 */
export function jsonTextRefusal(
  text: string | Uint8Array,
  maxValues = MAX_JSON_VALUES,
  maxKeys = MAX_JSON_KEYS,
): { past: 'values' | 'depth' | 'keys'; reason: string } | undefined {
  const past = jsonTextPast(text, maxValues + JSON_ENVELOPE_VALUES, MAX_JSON_TEXT_DEPTH, maxKeys);
  if (past === undefined) return undefined;
  return { past, reason: past === 'values' ? tooManyValues(maxValues) : past === 'keys' ? `holds more than ${maxKeys} distinct object keys` : TOO_DEEP };
}
const TOO_DEEP = nestedTooDeep(MAX_JSON_TEXT_DEPTH);

/**
 * Whether `value` holds more than `max` characters, counting each string's and key's characters and one for every
 * value (about its JSON text's length, which is what holding it costs), without building that text. Iterative (any
 * depth), and the walk stops once past `max`: checking a value costs no more than `max` allows.
 */
export function jsonCharsPast(value: unknown, max: number): boolean {
  const values: unknown[] = [value];
  let chars = 0;
  while (values.length) {
    const v = values.pop();
    chars++;
    if (typeof v === 'string') chars += v.length;
    else if (Array.isArray(v)) {
      if ((chars += v.length) > max) return true;
      for (const x of v) values.push(x);
    } else if (v && typeof v === 'object') {
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        if ((chars += k.length + 1) > max) return true;
        values.push((v as Record<string, unknown>)[k]);
      }
    }
    if (chars > max) return true;
  }
  return false;
}

/**
 * Why `value` cannot be stored, or undefined when it can; `textOnly`: key names are not held to PROTO_KEY (text,
 * depth and the number of values are). The walk stops at the first value past `maxValues`.
 */
export function unstorableReason(value: unknown, maxDepth = MAX_JSON_DEPTH, textOnly = false, maxValues = MAX_JSON_VALUES): string | undefined {
  if (maxDepth > 0 && value !== null && typeof value === 'object' && !Array.isArray(value)) {
    const flat = flatReason(value, textOnly, maxValues);
    if (flat !== NOT_FLAT) return flat;
  }
  // Two parallel stacks, not a stack of pairs: every append checks every value, and a pair per value was most of its garbage.
  const values: unknown[] = [value];
  const depths: number[] = [0];
  // Counted as they are met (an array's items before any is pushed): a payload past the bound costs no more than one at it.
  let seen = 1;
  let keys = 0;
  while (values.length) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) return UNSTORABLE_TEXT;
    } else if (v && typeof v === 'object') {
      if (depth >= maxDepth) return `nested deeper than ${maxDepth} levels`;
      if (Array.isArray(v)) {
        if ((seen += v.length) > maxValues) return tooManyValues(maxValues);
        for (const x of v) {
          values.push(x);
          depths.push(depth + 1);
        }
      } else {
        for (const k in v) {
          if (!Object.hasOwn(v, k)) continue;
          const refused = keyRefusal(k, ++seen, maxValues, textOnly);
          if (refused) return refused;
          keys++;
          values.push((v as Record<string, unknown>)[k]);
          depths.push(depth + 1);
        }
      }
    }
  }
  // Distinct keys are counted only when there are enough keys to pass the bound: a Set of every key is no cost for every append.
  if (!textOnly && keys > MAX_PAYLOAD_KEYS && tooManyKeys(value)) return tooManyDistinctKeys;
  return undefined;
}

const UNSTORABLE_TEXT = 'text contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored';
const tooManyDistinctKeys = `holds more than ${MAX_PAYLOAD_KEYS} distinct object keys`;

/** Why an object's key cannot be stored (unstorableReason's key rules), `seen` the values counted with it. */
function keyRefusal(k: string, seen: number, maxValues: number, textOnly: boolean): string | undefined {
  if (seen > maxValues) return tooManyValues(maxValues);
  if (!isStorableText(k)) return 'a key contains a NUL character (U+0000) or an unpaired surrogate, which cannot be stored';
  if (k === PROTO_KEY && !textOnly) return `a key is "${PROTO_KEY}", which would not be kept (it names an object's prototype in JavaScript): rename it`;
  return undefined;
}

const NOT_FLAT = Symbol('not flat');

/**
 * unstorableReason of an object none of whose values is an object or an array (most events' data: every bracket
 * event, a result, an input), with the same answer, checked in place: the walk's two stacks were most of an
 * append's checking garbage. NOT_FLAT for any other object: the walk checks it.
 */
function flatReason(v: object, textOnly: boolean, maxValues: number): string | undefined | typeof NOT_FLAT {
  let seen = 1;
  let keys = 0;
  // The keys first, in order, as the walk checks them before any value.
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    const x: unknown = (v as Record<string, unknown>)[k];
    if (x !== null && typeof x === 'object') return NOT_FLAT;
    const refused = keyRefusal(k, ++seen, maxValues, textOnly);
    if (refused) return refused;
    keys++;
  }
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    const x: unknown = (v as Record<string, unknown>)[k];
    if (typeof x === 'string' && !isStorableText(x)) return UNSTORABLE_TEXT;
  }
  if (!textOnly && keys > MAX_PAYLOAD_KEYS && tooManyKeys(v)) return tooManyDistinctKeys;
  return undefined;
}

/** Whether a value's objects hold more than MAX_PAYLOAD_KEYS distinct keys: more than any door takes in one payload. */
export const tooManyKeys = (value: unknown): boolean => distinctKeys(value) > MAX_PAYLOAD_KEYS;

/** The distinct keys of the objects in a value (walked iteratively: any depth). */
function distinctKeys(value: unknown): number {
  const names = new Set<string>();
  const values: unknown[] = [value];
  while (values.length) {
    const v = values.pop();
    if (Array.isArray(v)) for (const x of v) values.push(x);
    else if (v && typeof v === 'object') {
      for (const k in v) {
        if (!Object.hasOwn(v, k)) continue;
        names.add(k);
        values.push((v as Record<string, unknown>)[k]);
      }
    }
  }
  return names.size;
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
