// The engine a schema's `pattern` and `patternProperties` run on in the schema worker (schema-validators.ts,
// ../response-schema-validators.ts): RE2, whose time is linear in the text. re2-wasm runs it in a WebAssembly heap of
// a fixed 16 MiB that it never gives back: every pattern compiled stays in it for the worker's life (about 3,000
// small ones fill it), and a check of a string of a few MiB asks for more than there is. A full heap failed every
// pattern compiled or checked after it, any tenant's or server's (a schema "not valid", kept so), until the worker
// happened to be started again. So a string longer than MAX_PATTERN_TEXT is not given to it (the value is refused,
// PatternTextTooLong), and a heap found full ends the worker: a fresh one, with a fresh heap, takes the request
// again (schema-checks.ts; docs/agents.md "Structured output", docs/mcp.md "Names, arguments, results").
import { RE2 } from 're2-wasm';

/** The longest string checked against a pattern: its UTF-8 (up to 3 bytes a character) fits the engine's heap with room. */
const MAX_PATTERN_TEXT = 262_144;

/** A string longer than MAX_PATTERN_TEXT met a pattern: the value is refused, not checked. */
export class PatternTextTooLong extends Error {}

let heapFull = false;

/** Whether the engine's heap was found full in this thread: nothing compiled or checked on it since can be trusted. */
export function patternHeapFull(): boolean {
  return heapFull;
}

/** A WebAssembly trap (the engine aborting when its heap cannot grow) marks the heap full. */
function onEngine<T>(run: () => T): T {
  try {
    return run();
  } catch (err) {
    if (err instanceof WebAssembly.RuntimeError) heapFull = true;
    throw err;
  }
}

/** A compiled pattern as Ajv uses one: `test`, and `toString`, by which Ajv keeps each pattern once per compiler. */
class BoundedPattern {
  private readonly re: RE2;
  constructor(pattern: string, flags: string) {
    this.re = onEngine(() => new RE2(pattern, flags));
  }
  test(text: string): boolean {
    if (text.length > MAX_PATTERN_TEXT) {
      throw new PatternTextTooLong(`a string of ${text.length} characters is longer than the ${MAX_PATTERN_TEXT} a pattern is checked against`);
    }
    return onEngine(() => this.re.test(text));
  }
  toString(): string {
    return this.re.toString();
  }
}

/** Ajv's `code.regExp`: RE2, bounded as above (`code` names the engine in standalone code, which forkline does not generate). */
export const patternEngine = Object.assign((pattern: string, flags: string) => new BoundedPattern(pattern, flags), { code: 'RE2' });
