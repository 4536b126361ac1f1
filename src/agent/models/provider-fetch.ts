// The fetch every provider package is given (providers.ts): what a provider's
// server sends back is outside input, so one model call's response is bounded
// in bytes and in silence before the AI SDK parses any of it
// (docs/operations.md "Memory and time"). The SDK buffers an SSE line until it
// ends and reads error bodies up to 2 GiB; cutting the body here bounds both.
import { createParser } from 'eventsource-parser';
import { boundedBody, byteMeter } from '../bounded-body.ts';
import { sameOriginFetch } from '../same-origin-fetch.ts';
import type { EventScreen } from './gemini-events.ts';
import { ModelError } from './model.ts';

export interface ProviderLimits {
  /** The bytes one model call's response body may stream (FORKLINE_MODEL_MAX_RESPONSE_BYTES). */
  maxResponseBytes: number;
  /** The longest wait for the response's headers or its next bytes (FORKLINE_MODEL_IDLE_TIMEOUT_MS). */
  idleTimeoutMs: number;
  /** The longest one model call may take, headers to its last byte, however steadily it sends (FORKLINE_MODEL_CALL_TIMEOUT_MS); unset: the default. */
  callTimeoutMs?: number;
  /** The most tool calls one answer may make (FORKLINE_MODEL_MAX_TOOL_CALLS; language-model.ts); unset: the default. */
  maxToolCalls?: number;
}

/**
 * 32 MiB: a 131,072-token answer (settings.ts MAX_OUTPUT_TOKENS) streamed as SSE fits, framing and repeats included; 5 minutes
 * of silence; 15 minutes a call (a slow model's longest answer; a provider trickling a delta at a time never ends otherwise);
 * 128 tool calls an answer (far past the parallel calls models make; each becomes an event and a tool run).
 */
export const DEFAULT_PROVIDER_LIMITS = {
  maxResponseBytes: 32 * 1024 * 1024,
  idleTimeoutMs: 5 * 60 * 1000,
  callTimeoutMs: 15 * 60 * 1000,
  maxToolCalls: 128,
} satisfies Required<ProviderLimits>;

/** An error response's body is read up to this much (its message is short); the rest is never read. */
export const ERROR_BODY_MAX_BYTES = 64 * 1024;

/** A provider's response broke a limit: the call is given up (never tried again) and its turn fails saying which. */
export class ProviderLimitError extends ModelError {
  name = 'ProviderLimitError';
}

/**
 * A fetch that holds a response to `limits`; what breaks one errors with a ProviderLimitError (the adapter names the provider).
 * `screen` (one per response) checks each SSE event of a successful response before the SDK reads it.
 */
export function boundedFetch(limits: ProviderLimits, opts: { base?: typeof fetch; screen?: () => EventScreen } = {}): typeof fetch {
  const base = opts.base ?? globalThis.fetch;
  const tooLarge = () => new ProviderLimitError(`the response passed ${limits.maxResponseBytes} bytes (FORKLINE_MODEL_MAX_RESPONSE_BYTES) and was cut off`);
  const silent = () => new ProviderLimitError(`nothing arrived for ${limits.idleTimeoutMs} ms (FORKLINE_MODEL_IDLE_TIMEOUT_MS): the call was given up`);
  const callTimeoutMs = limits.callTimeoutMs ?? DEFAULT_PROVIDER_LIMITS.callTimeoutMs;
  const tooLong = () => new ProviderLimitError(`the call ran past ${callTimeoutMs} ms (FORKLINE_MODEL_CALL_TIMEOUT_MS) and was given up`);
  // A provider's key is in a header fetch would carry to wherever it redirects: redirects stay on its origin.
  const send = sameOriginFetch(base);
  return async (input, init) => {
    // Aborting the request (the caller's signal, or silence) ends the connection and errors the body.
    const given = new AbortController();
    const signal = init?.signal ? AbortSignal.any([init.signal, given.signal]) : given.signal;
    let timer: NodeJS.Timeout | undefined;
    const disarm = () => clearTimeout(timer);
    const arm = (onSilence: () => void) => {
      disarm();
      timer = setTimeout(onSilence, limits.idleTimeoutMs);
    };
    // Silence is timed per wait; the whole call once, however steadily the provider sends.
    const deadline = setTimeout(() => given.abort(tooLong()), callTimeoutMs);
    const ended = () => clearTimeout(deadline);
    arm(() => given.abort(silent()));
    let response: Response;
    try {
      response = await send(input, { ...init, signal });
    } catch (err) {
      ended();
      throw given.signal.aborted ? given.signal.reason : err;
    } finally {
      disarm();
    }
    const source = response.body;
    if (!source) {
      ended();
      return response;
    }
    const init2 = { status: response.status, statusText: response.statusText, headers: response.headers };
    if (!response.ok) {
      try {
        return new Response(await readErrorBody(source.getReader(), given, arm, disarm, silent), init2);
      } finally {
        ended();
      }
    }
    // Timed only while waiting on the provider: a slow reader here is not the provider's silence.
    const body = boundedBody(source, {
      meter: byteMeter(limits.maxResponseBytes),
      cut: tooLarge,
      idleTimeoutMs: limits.idleTimeoutMs,
      silent,
      done: (gaveUp) => {
        ended();
        if (gaveUp) given.abort(gaveUp);
      },
    });
    return new Response(opts.screen ? screenedEvents(body, opts.screen()) : body, init2);
  };
}

/** `body` with each SSE event checked as it arrives: one `check` refuses errors the body before the SDK reads the chunk holding it. */
function screenedEvents(body: ReadableStream<Uint8Array>, check: EventScreen): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  let refused: string | undefined;
  const parser = createParser({ onEvent: (event) => void (refused ??= check(event.data)) });
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        parser.feed(decoder.decode(chunk, { stream: true }));
        // Erroring here cancels the bounded body, and the connection goes with it.
        if (refused !== undefined) controller.error(new ProviderLimitError(refused));
        else controller.enqueue(chunk);
      },
    }),
  );
}

/** An error response's first ERROR_BODY_MAX_BYTES, read within one idle timeout; the connection is then closed. */
async function readErrorBody(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  given: AbortController,
  arm: (onSilence: () => void) => void,
  disarm: () => void,
  silent: () => Error,
): Promise<Uint8Array<ArrayBuffer>> {
  const kept = new Uint8Array(ERROR_BODY_MAX_BYTES);
  let length = 0;
  let timedOut = false;
  arm(() => {
    timedOut = true;
    reader.cancel().catch(() => {});
  });
  try {
    while (length < kept.length) {
      const r = await reader.read();
      if (r.done) break;
      const take = Math.min(r.value.byteLength, kept.length - length);
      kept.set(r.value.subarray(0, take), length);
      length += take;
    }
  } catch (err) {
    if (!timedOut) throw err;
  } finally {
    disarm();
  }
  if (timedOut && length === 0) throw silent();
  // What was not read is never read: the connection goes.
  given.abort();
  reader.cancel().catch(() => {});
  return kept.subarray(0, length);
}
