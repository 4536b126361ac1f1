// A JSON value as Postgres's jsonb gives it back: object keys in jsonb's order
// (shorter first, then bytewise), what JSON.stringify drops or nulls dropped
// or nulled. An append answers with the events it stored from what it sent
// (append.ts), so they read exactly as a read of the log returns them.

/** Not a character past U+007F: one byte each in UTF-8, so length and order are the bytes'. */
const isAscii = (s: string) => !/[^\u0000-\u007f]/.test(s); // eslint-disable-line no-control-regex

/** jsonb's key order: by length in UTF-8 bytes, then by bytes. */
function jsonbKeyOrder(a: string, b: string): number {
  if (isAscii(a) && isAscii(b)) return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length - y.length || Buffer.compare(x, y);
}

const dropped = (v: unknown) => v === undefined || typeof v === 'function' || typeof v === 'symbol';

/** `value` after JSON.stringify, a jsonb column and JSON.parse (null for what JSON.stringify makes nothing of). */
export function asJsonb(value: unknown): unknown {
  if (typeof value === 'number') return Number.isFinite(value) ? value + 0 : null; // -0 reads back as 0
  if (value === null || typeof value !== 'object') return dropped(value) ? null : value;
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === 'function') return asJsonb(withJson.toJSON());
  if (Array.isArray(value)) return Array.from(value, (v) => asJsonb(v)); // holes read back as null
  const source = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of jsonbKeys(source)) {
    const v = source[key];
    if (dropped(v)) continue;
    // JSON.parse makes "__proto__" an own key; an assignment would set the prototype.
    if (key === '__proto__') Object.defineProperty(out, key, { value: asJsonb(v), enumerable: true, writable: true, configurable: true });
    else out[key] = asJsonb(v);
  }
  return out;
}

/** Keys few enough to sort by insertion (at most 16×15/2 comparisons). */
const FEW_KEYS = 16;

/**
 * `source`'s keys in jsonb's order. Few keys are sorted in place by insertion: Array.prototype.sort allocates its work
 * space on every call, and an append calls this for every object of every event (most of its garbage, measured).
 */
function jsonbKeys(source: object): string[] {
  const keys = Object.keys(source);
  if (keys.length > FEW_KEYS) return keys.sort(jsonbKeyOrder);
  // Keys all ASCII (every event's own) are compared as they are, each tested once rather than at every comparison.
  const order = keys.every(isAscii) ? asciiKeyOrder : jsonbKeyOrder;
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i];
    let j = i - 1;
    for (; j >= 0 && order(keys[j], key) > 0; j--) keys[j + 1] = keys[j];
    keys[j + 1] = key;
  }
  return keys;
}

/** jsonbKeyOrder of two ASCII keys. */
const asciiKeyOrder = (a: string, b: string): number => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
