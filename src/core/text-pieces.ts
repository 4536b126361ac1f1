// A long text cut into pieces of a bounded size, for what carries text in
// parts: turn updates in NOTIFY payloads, and the text deltas /chat and /agui
// write (one client event per piece, never one of a whole answer).

/**
 * The most characters of text one client event carries (/chat's text-delta, /agui's TEXT_MESSAGE_CONTENT): at most
 * ~50 KB of JSON, what a client parses at once whatever a model streamed or a slow reader's queue merged.
 */
export const TEXT_DELTA_CHARS = 8192;

/** `text` in order, in pieces of at most `maxChars` code points (a surrogate pair is never split); one piece when it is short. */
export function textPieces(text: string, maxChars: number): string[] {
  if (text.length <= maxChars) return [text];
  const chars = Array.from(text);
  const pieces: string[] = [];
  for (let i = 0; i < chars.length; i += maxChars) pieces.push(chars.slice(i, i + maxChars).join(''));
  return pieces;
}
