// A unified diff of two texts (what `diff -u` prints, `git diff` style
// headers), pure, by jsdiff. Bounded and never in one piece: jsdiff's async
// mode works one edit length per macrotask, so other requests run between the
// steps; past `maxEditLines` changed lines, or `timeoutMs`, there is no diff
// (a rewrite is what such a change is). A line diff of a few hundred changed
// lines in a 200 KB text takes jsdiff about half a second of work in all.
import { FILE_HEADERS_ONLY, formatPatch, structuredPatch } from 'diff';

/** Changed lines (added + removed) a diff follows before giving up. */
export const DIFF_MAX_EDIT_LINES = 2000;
/** Time one diff may take, waits between its steps included, before giving up. */
export const DIFF_TIMEOUT_MS = 2000;

export interface DiffBounds {
  maxEditLines?: number;
  timeoutMs?: number;
}

/**
 * A unified diff from `before` to `after` (either absent: the file was added
 * or deleted), headed `--- a/<path>` / `+++ b/<path>` (`/dev/null` for an
 * absent side), three lines of context. Equal texts give ''; undefined when
 * the change is past the bounds.
 */
export function unifiedDiff(path: string, before: string | undefined, after: string | undefined, bounds: DiffBounds = {}): Promise<string | undefined> {
  if (before === after) return Promise.resolve('');
  const oldName = before === undefined ? '/dev/null' : `a/${path}`;
  const newName = after === undefined ? '/dev/null' : `b/${path}`;
  return new Promise((resolve) => {
    structuredPatch(oldName, newName, before ?? '', after ?? '', undefined, undefined, {
      context: 3,
      maxEditLength: bounds.maxEditLines ?? DIFF_MAX_EDIT_LINES,
      timeout: Math.max(0, bounds.timeoutMs ?? DIFF_TIMEOUT_MS),
      callback: (patch) => resolve(patch && formatPatch(patch, FILE_HEADERS_ONLY)),
    });
  });
}
