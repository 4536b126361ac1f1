// A unified diff of two texts (what `diff -u` prints, `git diff` style
// headers), pure. Myers' O(ND) line diff; past MAX_EDITS edits the whole old
// text is shown replaced by the new (a rewrite is what such a change is).

const CONTEXT = 3;
const MAX_EDITS = 4000;

type Op = { kind: ' ' | '-' | '+'; line: string };

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** The edit script from `a` to `b` (Myers), or undefined past `MAX_EDITS` edits. */
function editScript(a: string[], b: string[]): Op[] | undefined {
  const n = a.length;
  const m = b.length;
  const max = Math.min(n + m, MAX_EDITS);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return backtrack(trace, a, b, d, offset);
    }
  }
  return undefined;
}

function backtrack(trace: Int32Array[], a: string[], b: string[], dEnd: number, offset: number): Op[] {
  const ops: Op[] = [];
  let x = a.length;
  let y = b.length;
  for (let d = dEnd; d > 0; d--) {
    const v = trace[d];
    const k = x - y;
    const prevK = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? k + 1 : k - 1;
    const prevX = v[offset + prevK];
    const prevY = prevX - prevK;
    while (x > prevX && y > prevY) {
      ops.push({ kind: ' ', line: a[--x] });
      y--;
    }
    if (x === prevX) ops.push({ kind: '+', line: b[--y] });
    else ops.push({ kind: '-', line: a[--x] });
  }
  while (x > 0 && y > 0) {
    ops.push({ kind: ' ', line: a[--x] });
    y--;
  }
  return ops.reverse();
}

/**
 * A unified diff from `before` to `after` (either absent: the file was added
 * or deleted), headed `--- a/<path>` / `+++ b/<path>` (`/dev/null` for an
 * absent side). Equal texts give ''.
 */
export function unifiedDiff(path: string, before: string | undefined, after: string | undefined): string {
  if (before === after) return '';
  const a = splitLines(before ?? '');
  const b = splitLines(after ?? '');
  const ops = editScript(a, b) ?? [...a.map((line) => ({ kind: '-' as const, line })), ...b.map((line) => ({ kind: '+' as const, line }))];
  const out = [`--- ${before === undefined ? '/dev/null' : `a/${path}`}`, `+++ ${after === undefined ? '/dev/null' : `b/${path}`}`];
  // Hunks: runs of changes with up to CONTEXT lines around them, merged when their context touches.
  let i = 0;
  const lineA = new Int32Array(ops.length + 1);
  const lineB = new Int32Array(ops.length + 1);
  for (let j = 0, la = 0, lb = 0; j < ops.length; j++) {
    lineA[j] = la;
    lineB[j] = lb;
    if (ops[j].kind !== '+') la++;
    if (ops[j].kind !== '-') lb++;
  }
  while (i < ops.length) {
    while (i < ops.length && ops[i].kind === ' ') i++;
    if (i >= ops.length) break;
    const start = Math.max(0, i - CONTEXT);
    let end = i;
    for (let quiet = 0; end < ops.length; end++) {
      if (ops[end].kind === ' ') {
        if (++quiet > 2 * CONTEXT) break;
      } else quiet = 0;
    }
    // Trim trailing context to CONTEXT lines.
    let stop = end;
    while (stop > start && ops[stop - 1].kind === ' ') stop--;
    stop = Math.min(ops.length, stop + CONTEXT);
    const hunk = ops.slice(start, stop);
    const countA = hunk.filter((o) => o.kind !== '+').length;
    const countB = hunk.filter((o) => o.kind !== '-').length;
    const fromA = countA ? lineA[start] + 1 : lineA[start];
    const fromB = countB ? lineB[start] + 1 : lineB[start];
    out.push(`@@ -${fromA},${countA} +${fromB},${countB} @@`);
    for (const o of hunk) out.push(`${o.kind}${o.line}`);
    i = stop;
  }
  return `${out.join('\n')}\n`;
}
