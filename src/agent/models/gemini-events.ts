// What a Gemini stream's events may say before the AI SDK reads them
// (docs/operations.md "Memory and time"). Gemini streams a function call's
// arguments as `partialArgs`: values, each at a JSON path (`$.items[3].name`).
// The SDK builds the arguments by those paths, putting an array element at
// whatever index a path names, and writes them out as JSON text when the call
// ends: one event of 200 bytes naming `$.a[100000000]` became a string of
// 500 MB, made in one go on the event loop. A real stream writes an array's
// elements in order, each in one value at least, so an index is at most the
// number of values the response has sent before it: the text the SDK writes
// then stays a few times what arrived, and the byte bound holds it.

/** What one response's events are checked with: an event's data in, why it is refused out (or undefined). */
export type EventScreen = (data: string) => string | undefined;

const ARRAY_INDEX = /\[(\d+)\]/g;

/** A screen for one Gemini response (it counts the values sent so far). */
export function geminiEventScreen(): EventScreen {
  let values = 0;
  return (data) => {
    let event: unknown;
    try {
      event = JSON.parse(data);
    } catch {
      return undefined; // the SDK says what it cannot parse
    }
    for (const arg of partialArgsOf(event)) {
      const path = (arg as { jsonPath?: unknown } | null)?.jsonPath;
      if (typeof path === 'string') {
        for (const [, index] of path.matchAll(ARRAY_INDEX)) {
          if (Number(index) > values) {
            return `Gemini's stream put a function call's argument at array index ${index.slice(0, 20)} after ${values} values (each index needs the values before it): the answer was given up`;
          }
        }
      }
      values++;
    }
    return undefined;
  };
}

/** Every `partialArgs` entry of a streamGenerateContent event (candidates[].content.parts[].functionCall.partialArgs[]). */
function* partialArgsOf(event: unknown): Generator<unknown> {
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const field = (v: unknown, key: string): unknown => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[key] : undefined);
  for (const candidate of list(field(event, 'candidates'))) {
    for (const part of list(field(field(candidate, 'content'), 'parts'))) yield* list(field(field(part, 'functionCall'), 'partialArgs'));
  }
}
