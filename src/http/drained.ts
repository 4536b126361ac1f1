// Waiting for a streamed response's client to read: one promise per full
// buffer, shared by everyone waiting on it, settled on 'drain' or 'close' with
// both listeners removed (a listener per wait would pile up on a long stream
// to a slow reader).
import type http from 'node:http';

const waiting = new WeakMap<http.ServerResponse, Promise<void>>();

/** A promise while `res`'s buffer is full (until it drains or closes), else undefined. */
export function drained(res: http.ServerResponse): Promise<void> | undefined {
  if (!res.writableNeedDrain || res.destroyed) return undefined;
  let wait = waiting.get(res);
  if (!wait) {
    wait = new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        waiting.delete(res);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });
    waiting.set(res, wait);
  }
  return wait;
}
