// A response body from outside (a model provider's, an MCP server's) read
// through bounds before anything parses it (docs/operations.md "Memory and
// time"): its bytes (a meter says where a chunk passes the bound, and the
// body then ends cleanly or fails), the silence between its chunks, and how
// fast it is read. What is past a bound is never read: the source is
// cancelled and its owner told, so it aborts the request and the connection
// goes with it.

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
  const rate = bounds.bytesPerSecond ?? Infinity;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (windowBytes >= rate) {
        await new Promise((r) => setTimeout(r, Math.max(0, windowStart + 1000 - Date.now())));
        windowStart = Date.now();
        windowBytes = 0;
      }
      if (bounds.idleTimeoutMs !== undefined) {
        timer = setTimeout(() => {
          const err = bounds.silent?.() ?? new Error(`nothing arrived for ${bounds.idleTimeoutMs} ms`);
          controller.error(err);
          finish(err);
        }, bounds.idleTimeoutMs);
      }
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (finished) return; // given up meanwhile: the body already says why
        controller.error(err);
        finish();
        return;
      } finally {
        clearTimeout(timer);
      }
      if (finished) return;
      if (chunk.done) {
        controller.close();
        finish();
        return;
      }
      windowBytes += chunk.value.byteLength;
      const at = bounds.meter?.(chunk.value) ?? -1;
      if (at < 0) {
        controller.enqueue(chunk.value);
        return;
      }
      const end = bounds.cut?.() ?? new Error('the body passed its bound');
      if (end instanceof Error) {
        controller.error(end);
        finish(end);
        return;
      }
      if (at > 0) controller.enqueue(chunk.value.subarray(0, at));
      controller.enqueue(end);
      controller.close();
      finish(new Error('the body was cut'));
    },
    async cancel(reason) {
      // The reader drops a body it does not need: the connection goes with it.
      clearTimeout(timer);
      await reader.cancel(reason).catch(() => {});
      finish();
    },
  });
}
