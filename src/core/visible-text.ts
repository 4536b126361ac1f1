// Text from outside (titles, file paths, tool output, model text) made safe to
// show where a person reads it: a terminal (the CLI) or the dashboard's names.
// Characters that change what is shown without being shown themselves are
// replaced by a visible escape (docs/operations.md "Threat model"):
// - C0 and C1 controls and DEL: ESC and CSI start ANSI/OSC sequences (clear
//   the screen, move the cursor over text, write the clipboard, make a
//   hyperlink), CR and BS overwrite what was written, BEL rings;
// - bidi controls: an override shows `invoice<U+202E>txt.exe` as `invoiceexe.txt`;
// - invisible characters: a zero-width space inside `pay<U+200B>pal`, Unicode tag
//   characters that carry hidden ASCII.
// Joiners (U+200C, U+200D) stay: scripts and emoji need them.

// eslint-disable-next-line no-control-regex -- control characters are what it replaces
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u{e0000}-\u{e007f}]/gu;
// eslint-disable-next-line no-control-regex -- the same, but keeping newlines and tabs
const HIDDEN_IN_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u{e0000}-\u{e007f}]/gu;

/** `\x1b`, `\u202e`, `\u{e0041}`: how a hidden character is shown. */
function escaped(ch: string): string {
  const code = ch.codePointAt(0)!;
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\u{${code.toString(16)}}`;
}

/** One line of text as it may be shown: every hidden character (newlines and tabs too) replaced by its escape. */
export const visibleText = (text: string): string => text.replace(HIDDEN, escaped);

/** Text of several lines as it may be shown: newlines (CRLF as LF) and tabs kept, every other hidden character replaced by its escape. */
export const visibleLines = (text: string): string => text.replace(/\r\n/g, '\n').replace(HIDDEN_IN_LINES, escaped);

/** ANSI escape sequences (CSI: colours, cursor moves; OSC: titles, the clipboard, links). */
// eslint-disable-next-line no-control-regex -- escape sequences are what it matches
const ANSI_SEQUENCE = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)/g;

/**
 * A program's output (a command's, a tool's) as the log keeps it: its terminal escape sequences
 * dropped (colours are noise to the model), every other hidden character but newlines and tabs shown.
 */
export const visibleOutput = (text: string): string => visibleLines(text.replace(ANSI_SEQUENCE, ''));
