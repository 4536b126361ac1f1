// Ids made from another id (docs/contract.md#repair): a result's id from its call's, which may itself be as
// long as an id may be (200 characters, the codec's `id`). A prefix on such an id would make a result no log
// takes, and a crash or a fork there could never be repaired. Pure, no imports (the dashboard imports core).

/** The longest id an event holds (core/events.ts `id`). */
export const MAX_ID_CHARS = 200;

/** FNV-1a over UTF-16 units, as 8 hex digits: tells apart ids cut to the same text. */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return (hash >>> 0).toString(16).padStart(8, '0');
}

/**
 * `text` when it fits an id, else its first characters and a hash of the whole, MAX_ID_CHARS long: the same
 * text always gives the same id (a repeated repair names the same result), and no pair is split by the cut.
 */
export function boundedId(text: string): string {
  if (text.length <= MAX_ID_CHARS) return text;
  const suffix = `~${fnv1a(text)}`;
  return `${text.slice(0, MAX_ID_CHARS - suffix.length).toWellFormed()}${suffix}`;
}
