// The bounds on a body from outside (agent/bounded-body.ts), which the model
// providers' fetch and the MCP Streamable HTTP fetch share: bytes, silence,
// rate, and the source given up (cancelled) once a bound is passed.
import { describe, expect, it } from 'vitest';
import { boundedBody, byteMeter } from '../../src/agent/bounded-body.ts';

const enc = new TextEncoder();

/** A source that answers `chunks` then, unless `end`, stays silent; it notes when it was cancelled. */
function source(chunks: string[], end = true) {
  const seen = { pulled: 0, cancelled: undefined as unknown };
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      const next = chunks[seen.pulled++];
      if (next !== undefined) c.enqueue(enc.encode(next));
      else if (end) c.close();
      else return new Promise(() => {}); // silent
    },
    cancel(reason) {
      seen.cancelled = reason;
    },
  });
  return { stream, seen };
}

const text = (body: ReadableStream<Uint8Array>) => new Response(body).text();

describe('boundedBody', () => {
  it('passes a body within its bounds through whole, and says it is done', async () => {
    const { stream } = source(['ab', 'cd']);
    const done: unknown[] = [];
    expect(await text(boundedBody(stream, { meter: byteMeter(4), done: (why) => done.push(why) }))).toBe('abcd');
    expect(done).toEqual([undefined]);
  });

  it('fails a body past its bytes with the cut error, and gives the source up (never read further)', async () => {
    const { stream, seen } = source(['ab', 'cd', 'ef', 'gh']);
    const done: unknown[] = [];
    const body = boundedBody(stream, { meter: byteMeter(5), cut: () => new Error('too large'), done: (why) => done.push(why) });
    await expect(text(body)).rejects.toThrow('too large');
    expect(seen.pulled).toBeLessThanOrEqual(4);
    expect(seen.cancelled).toEqual(new Error('too large'));
    expect(done).toEqual([new Error('too large')]);
  });

  it('ends a body cleanly where the meter says, with what `cut` gives', async () => {
    const { stream, seen } = source(['abc', 'defgh', 'ijk']);
    const body = boundedBody(stream, { meter: byteMeter(5), cut: () => enc.encode('|cut') });
    expect(await text(body)).toBe('abcde|cut');
    expect(seen.cancelled).toBeInstanceOf(Error);
  });

  it('fails a body that goes silent after the idle timeout, with `silent()`', async () => {
    const { stream, seen } = source(['a'], false);
    const done: unknown[] = [];
    const started = performance.now();
    const body = boundedBody(stream, { idleTimeoutMs: 100, silent: () => new Error('silent'), done: (why) => done.push(why) });
    await expect(text(body)).rejects.toThrow('silent');
    expect(performance.now() - started).toBeGreaterThanOrEqual(90);
    expect(seen.cancelled).toEqual(new Error('silent'));
    expect(done).toEqual([new Error('silent')]);
  });

  it('reads at most `bytesPerSecond`: past it, the next read waits for the next second', async () => {
    const { stream, seen } = source(['aaaa', 'bbbb', 'cccc']);
    const reader = boundedBody(stream, { bytesPerSecond: 4 }).getReader();
    await reader.read();
    const started = performance.now();
    const pulledBefore = seen.pulled;
    const second = await reader.read();
    expect(new TextDecoder().decode(second.value)).toBe('bbbb');
    expect(pulledBefore).toBeLessThanOrEqual(2);
    expect(performance.now() - started).toBeGreaterThanOrEqual(500);
  });

  it('passes chunks on in pieces of at most `pieceBytes`, each in a turn of the event loop of its own, metered piece by piece', async () => {
    const { stream } = source(['aaaaaaaaaa', 'bb']);
    const metered: number[] = [];
    const reader = boundedBody(stream, { pieceBytes: 4, meter: (piece) => (metered.push(piece.length), -1) }).getReader();
    const pieces: string[] = [];
    // Counts turns of the event loop while the pieces are read (none pass while a reader only awaits microtasks).
    let turns = 0;
    let counting = true;
    const tick = () => (turns++, counting && setImmediate(tick));
    setImmediate(tick);
    for (let r = await reader.read(); !r.done; r = await reader.read()) pieces.push(new TextDecoder().decode(r.value));
    counting = false;
    expect(pieces).toEqual(['aaaa', 'aaaa', 'aa', 'bb']);
    expect(metered).toEqual([4, 4, 2, 2]);
    expect(turns).toBeGreaterThanOrEqual(3);
  });

  it('with `messages`, reads at most `messagesPerSecond`: past it, the next piece waits for the next second', async () => {
    const { stream } = source(['m', 'm', 'm']);
    let messages = 0;
    const reader = boundedBody(stream, { messagesPerSecond: 2, messages: () => messages, meter: () => (messages++, -1) }).getReader();
    await reader.read();
    await reader.read();
    const started = performance.now();
    await reader.read();
    expect(performance.now() - started).toBeGreaterThanOrEqual(500);
  });

  it("the reader's cancel reaches the source and ends it, not as a bound", async () => {
    const { stream, seen } = source(['a'], false);
    const done: unknown[] = [];
    const body = boundedBody(stream, { done: (why) => done.push(why) });
    const reader = body.getReader();
    await reader.read();
    await reader.cancel('not needed');
    expect(seen.cancelled).toBe('not needed');
    expect(done).toEqual([undefined]);
  });
});
