// How long a response may wait for its client to read (docs/operations.md
// "Memory and time"). Every door writes only as its client reads (a full
// buffer is waited on: drained.ts, yoga's own writer, the recording download),
// so what a client that stops reading makes the process hold is bounded in
// bytes — one buffer and one chunk. This bounds it in time: a response whose
// buffer stays full, or whose last bytes stay unsent, for stallMs is cut
// (its connection destroyed). What the response carried goes on without it:
// an AG-UI run's or a /chat answer's turn runs to its end in the log.
import http from 'node:http';

/** A node:http ServerResponse class whose responses are cut when their client does not take a full buffer within `stallMs` (0: never); `onCut` is told of each. */
export function stallBoundedResponse(stallMs: number, onCut?: () => void): typeof http.ServerResponse {
  if (!stallMs) return http.ServerResponse;
  /** Each response's running stall: its timer and how to stop it. */
  const stalls = new WeakMap<http.ServerResponse, () => void>();
  /** Cut unless `until` (or the response's close) comes within stallMs; one stall per response at a time. */
  const arm = (res: http.ServerResponse, until: 'drain' | 'finish') => {
    stalls.get(res)?.();
    if (res.destroyed) return;
    const timer = setTimeout(() => {
      res.destroy();
      onCut?.();
    }, stallMs);
    timer.unref();
    const stop = () => {
      clearTimeout(timer);
      res.off(until, stop).off('close', stop);
      stalls.delete(res);
    };
    stalls.set(res, stop);
    res.on(until, stop).on('close', stop);
  };

  class StallBoundedResponse extends http.ServerResponse {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- forwards write's overloads as they are
    override write(...args: any[]): boolean {
      const more = (super.write as (...a: unknown[]) => boolean)(...args);
      if (!more && !stalls.has(this)) arm(this, 'drain'); // a door waits for 'drain' before it writes again
      return more;
    }

    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- forwards end's overloads as they are
    override end(...args: any[]): this {
      (super.end as (...a: unknown[]) => this)(...args);
      // A response ended while its socket is full has bytes left to send: they must go within stallMs too.
      if (this.socket?.writableNeedDrain && !this.writableFinished) arm(this, 'finish');
      return this;
    }
  }
  return StallBoundedResponse as typeof http.ServerResponse;
}
