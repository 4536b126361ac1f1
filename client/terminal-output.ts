// What the CLI writes. Text from outside (titles, paths, tool and MCP output,
// model text, error messages) never reaches a terminal as control sequences:
// lines for people show every control, bidi and invisible character as its
// escape (core/visible-text.ts), on a terminal and into a pipe alike (a pipe
// often ends at one: `| less -R`, `| tee`, a CI log). JSON lines for programs
// keep their values exact (docs/api.md).
import { visibleLines, visibleText } from '../src/core/visible-text.ts';

/** A line for people, to stdout (or `to`). */
export const printLine = (line: string, to: NodeJS.WritableStream = process.stdout) => to.write(`${visibleText(line)}\n`);

/** Text for people that keeps its lines and tabs (a streamed answer). */
export const printText = (text: string) => process.stdout.write(visibleLines(text));

// What JSON.stringify leaves raw that a terminal acts on or hides: DEL, C1 controls (U+009B is a CSI), bidi and
// invisible characters, tag characters (as their UTF-16 surrogates). C0 controls it escapes itself.
const RAW_IN_JSON = /[\u007f-\u009f\u061c\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]|\udb40[\udc00-\udc7f]/g;

/** A value as one line of JSON: JSON.parse gives back exactly `value`; no character in it is one a terminal acts on or hides. */
const jsonText = (value: unknown): string => JSON.stringify(value).replace(RAW_IN_JSON, (unit) => `\\u${unit.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** A JSON line for programs, to stdout. */
export const printJson = (value: unknown) => process.stdout.write(`${jsonText(value)}\n`);
