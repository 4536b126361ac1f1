// A response body from outside (a model provider's, an MCP server's) read
// through bounds before anything parses it (docs/operations.md "Memory and
// time"): its bytes (a meter says where a chunk passes the bound, and the
// body then ends cleanly or fails), the silence between its chunks, and how
// fast it is read. What is past a bound is never read: the source is
// cancelled and its owner told, so it aborts the request and the connection
// goes with it. With `pieceBytes`, a chunk is passed on in pieces and the
// event loop is let go between them: what a reader does with one piece (parse
// its messages, run their handlers) is one bounded stretch, not a whole
// socket read's worth of them.
import { setImmediate as letGo } from 'node:timers/promises';

export interface BodyBounds {
  /** Where in `chunk` the body passes its bound (an index into it), or -1: not yet (see `byteMeter`). */
  meter?: (chunk: Uint8Array) => number;
  /** What the body ends with once past its bound: bytes that end it cleanly (after the part before the bound), or the error it fails with. */
  cut?: () => Uint8Array | Error;
  /** The longest wait for the source's next bytes (timed only while this side waits on the source): then the body fails with `silent()`. */
  idleTimeoutMs?: number;
  silent?: () => Error;
  /** Past this many bytes in a second, the next read waits for the next second (what is not read waits in the sender's socket). */
  bytesPerSecond?: number;
  /**
   * Chunks are metered and passed on in pieces of at most this many bytes, each in its own turn of the
   * event loop (what the reader does with one piece is one stretch of it).
   */
  pieceBytes?: number;
  /** With `messages` (how many the meter has seen so far): past this many in a second, the next piece waits for the next second. */
  messagesPerSecond?: number;
  messages?: () => number;
  /**
   * Called once, when the source is no longer read: at its end, its error, the reader's cancel, or
   * (with why) when a bound gave it up, so the owner aborts its request.
   */
  done?: (gaveUp?: Error) => void;
}

/** A meter of the body's total bytes: past `max`, the chunk that passes it is cut where it does. */
export function byteMeter(max: number): (chunk: Uint8Array) => number {
  let total = 0;
  return (chunk) => {
    const before = total;
    total += chunk.byteLength;
    return total > max ? max - before : -1;
  };
}

export function boundedBody(source: ReadableStream<Uint8Array>, bounds: BodyBounds): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  let finished = false;
  const finish = (gaveUp?: Error) => {
    if (finished) return;
    finished = true;
    clearTimeout(timer);
    if (gaveUp) void reader.cancel(gaveUp).catch(() => {});
    bounds.done?.(gaveUp);
  };
  let timer: NodeJS.Timeout | undefined;
  let windowStart = Date.now();
  let windowBytes = 0;
  let windowMessages = 0;
  const rate = bounds.bytesPerSecond ?? Infinity;
  const messageRate = bounds.messages ? (bounds.messagesPerSecond ?? Infinity) : Infinity;
  const pieceBytes = bounds.pieceBytes ?? Infinity;
  /** What was read of the source and not passed on yet (the rest of a chunk cut in pieces). */
  let held: Uint8Array | undefined;
  /** Whether a piece was passed on since the event loop was last let go. */
  let passed = false;

  /** The source's next bytes (or its end), with the idle bound while this side waits on it. */
  async function next(controller: ReadableStreamDefaultController<Uint8Array>): Promise<Uint8Array | 'done' | undefined> {
    if (bounds.idleTimeoutMs !== undefined) {
      timer = setTimeout(() => {
        const err = bounds.silent?.() ?? new Error(`nothing arrived for ${bounds.idleTimeoutMs} ms`);
        controller.error(err);
        finish(err);
      }, bounds.idleTimeoutMs);
    }
    try {
      const chunk = await reader.read();
      return chunk.done ? 'done' : chunk.value;
    } catch (err) {
      if (!finished) {
        controller.error(err);
        finish();
      }
      return undefined; // given up meanwhile: the body already says why
    } finally {
      clearTimeout(timer);
    }
  }

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (passed && pieceBytes !== Infinity) {
        passed = false;
        await letGo();
        if (finished) return;
      }
      const counted = bounds.messages?.() ?? 0;
      if (windowBytes >= rate || counted - windowMessages >= messageRate) {
        await new Promise((r) => setTimeout(r, Math.max(0, windowStart + 1000 - Date.now())));
        windowStart = Date.now();
        windowBytes = 0;
        windowMessages = bounds.messages?.() ?? 0;
        if (finished) return;
      } else if (Date.now() - windowStart >= 1000) {
        windowStart = Date.now();
        windowBytes = 0;
        windowMessages = counted;
      }
      let chunk = held;
      held = undefined;
      if (!chunk) {
        const read = await next(controller);
        if (read === undefined || finished) return;
        if (read === 'done') {
          controller.close();
          finish();
          return;
        }
        chunk = read;
      }
      if (chunk.byteLength > pieceBytes) {
        held = chunk.subarray(pieceBytes);
        chunk = chunk.subarray(0, pieceBytes);
      }
      windowBytes += chunk.byteLength;
      passed = true;
      const at = bounds.meter?.(chunk) ?? -1;
      if (at < 0) {
        controller.enqueue(chunk);
        return;
      }
      held = undefined;
      const end = bounds.cut?.() ?? new Error('the body passed its bound');
      if (end instanceof Error) {
        controller.error(end);
        finish(end);
        return;
      }
      if (at > 0) controller.enqueue(chunk.subarray(0, at));
      controller.enqueue(end);
      controller.close();
      finish(new Error('the body was cut'));
    },
    async cancel(reason) {
      // The reader drops a body it does not need: the connection goes with it.
      clearTimeout(timer);
      held = undefined;
      await reader.cancel(reason).catch(() => {});
      finish();
    },
  });
}
