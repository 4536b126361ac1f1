// A tool's output as the content of its result (docs/runners.md, "What a
// tool hands back"). The tool has run by the time its output is read, so
// whatever the output is, its result must say the tool ran: an output that
// is not JSON (a BigInt, a cycle, a function) or too big to store becomes an
// `error` result saying so, never a missing result (which the step's end
// would record as a call that did not run).

/** Bytes of a result's content a runner stores by default (ForklineRunnerOptions.maxResultBytes). */
export const DEFAULT_MAX_RESULT_BYTES = 1_000_000;

export interface ToolResultContent {
  status: 'ok' | 'error';
  content: string;
}

const messageOf = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** A tool's output as a result: a string as it is, anything else as JSON; an output with no JSON form is an `error` result saying the tool ran. */
export function toolOutputContent(output: unknown): ToolResultContent {
  if (typeof output === 'string') return { status: 'ok', content: output };
  let json: string | undefined;
  try {
    json = JSON.stringify(output ?? null);
  } catch (err) {
    return { status: 'error', content: `the tool ran, but its output could not be recorded: it is not JSON (${messageOf(err)})` };
  }
  // JSON.stringify answers undefined for a function or a symbol: nothing to store.
  if (json === undefined) return { status: 'error', content: `the tool ran, but its output could not be recorded: a ${typeof output} is not JSON` };
  return { status: 'ok', content: json };
}

/**
 * Text the log can store: each NUL (U+0000) and unpaired surrogate becomes U+FFFD, as forkline's own agent
 * stores a tool's output or a model's answer (a batch holding either is refused, and the result with it).
 */
export const storableText = (s: string) => (s.includes('\u0000') ? s.replaceAll('\u0000', '\uFFFD') : s).toWellFormed();

/** `content` made storable and held to `maxBytes` of UTF-8: over it, an `error` result saying the tool ran and how big its output was. */
export function boundedResult(result: ToolResultContent, maxBytes: number): ToolResultContent {
  const content = storableText(result.content);
  if (content !== result.content) return boundedResult({ ...result, content }, maxBytes);
  // Four bytes a character at most: a short text needs no count.
  if (result.content.length * 4 <= maxBytes) return result;
  const bytes = new TextEncoder().encode(result.content).byteLength;
  if (bytes <= maxBytes) return result;
  return {
    status: 'error',
    content: `the tool ran, but its output (${bytes} bytes) is over this runner's limit of ${maxBytes} bytes (maxResultBytes), so it was not recorded`,
  };
}

/**
 * A stored result as forkline's model request hands it to the model (Session.modelRequest's `messages`): an `error`
 * result's text marked `Error: `, as for forkline's own agent (docs/runners.md, "What a tool hands back"). An adapter
 * hands the model this text in the step that ran the call too, so a later step or a fork, built from the log, sends
 * the model what that step sent.
 */
export const handedResultText = (result: ToolResultContent): string => (result.status === 'error' ? `Error: ${result.content}` : result.content);

/** A tool's output as the result a runner stores (toolOutputContent, held to `maxBytes`). */
export function toolResultContent(output: unknown, maxBytes: number): ToolResultContent {
  return boundedResult(toolOutputContent(output), maxBytes);
}
