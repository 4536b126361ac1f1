// Search snippets (searchSessions): plain text with the matched words between
// ⟦ and ⟧. Split here, rendered as text and <b> by search.tsx: never as HTML.

/** A snippet's parts: the matched words (between ⟦ and ⟧) flagged. Pure. */
export function snippetParts(snippet: string): Array<{ text: string; match: boolean }> {
  const parts: Array<{ text: string; match: boolean }> = [];
  const push = (text: string, match: boolean) => {
    if (!text) return;
    const last = parts[parts.length - 1];
    if (last && last.match === match) last.text += text;
    else parts.push({ text, match });
  };
  const [head, ...rest] = snippet.split('⟦');
  push(head, false);
  for (const piece of rest) {
    const stop = piece.indexOf('⟧');
    if (stop < 0) push(piece, false);
    else {
      push(piece.slice(0, stop), true);
      push(piece.slice(stop + 1), false);
    }
  }
  return parts;
}
