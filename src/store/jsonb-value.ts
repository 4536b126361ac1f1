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
  for (const key of Object.keys(source)
    .filter((k) => !dropped(source[k]))
    .sort(jsonbKeyOrder)) {
    // JSON.parse makes "__proto__" an own key; an assignment would set the prototype.
    if (key === '__proto__') Object.defineProperty(out, key, { value: asJsonb(source[key]), enumerable: true, writable: true, configurable: true });
    else out[key] = asJsonb(source[key]);
  }
  return out;
}
