// A recording imported through POST /recordings, and a chat's answer replayed
// through GET /chat/<id>/stream as the `ai` package's own client reads it
// (DefaultChatTransport's reconnectToStream, readUIMessageStream).
import { expect } from 'vitest';
import { DefaultChatTransport, readUIMessageStream, type UIMessage, type UIMessageChunk } from 'ai';

/** The session POST /recordings made of `body` (an NDJSON recording). */
export async function importedRecording(base: string, body: string): Promise<{ id: string; eventCount: number }> {
  const res = await fetch(`${base}/recordings`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
  expect(res.status).toBe(201);
  return ((await res.json()) as { session: { id: string; eventCount: number } }).session;
}

/** The stream, read by a client that first reads nothing for `stallMs` (the server's socket buffers fill meanwhile). */
function stalled(stream: ReadableStream<UIMessageChunk>, stallMs: number): ReadableStream<UIMessageChunk> {
  const reader = stream.getReader();
  let started = false;
  return new ReadableStream<UIMessageChunk>(
    {
      async pull(controller) {
        if (!started) await new Promise((r) => setTimeout(r, stallMs));
        started = true;
        const r = await reader.read();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    },
    { highWaterMark: 0 },
  );
}

/**
 * The chat's answer replayed, as the AI SDK's client reads it (DefaultChatTransport parses each chunk with the
 * protocol's schema) and, with `build`, builds it (readUIMessageStream, which copies the message at every chunk: a
 * message of 10,000 parts is read in seconds, built in minutes).
 */
export async function replayChat(base: string, chatId: string, stallMs = 0, build = true) {
  const transport = new DefaultChatTransport({ api: `${base}/chat` });
  const stream = await transport.reconnectToStream({ chatId });
  expect(stream).not.toBeNull();
  const { chunks, errors, done } = followChat(stalled(stream!, stallMs), build);
  const message = await done;
  if (!build) for (const c of chunks) if (c.type === 'error') errors.push(new Error(c.errorText));
  return { chunks, message, errors };
}

/**
 * An answer's stream read as it comes: `chunks` as they arrive (a test may wait on them), and, with `build`, the
 * message readUIMessageStream makes of them once the stream ends (`done`).
 */
export function followChat(stream: ReadableStream<UIMessageChunk>, build = true) {
  const [a, b] = stream.tee();
  const chunks: UIMessageChunk[] = [];
  const reading = (async () => {
    const reader = a.getReader();
    for (let r = await reader.read(); !r.done; r = await reader.read()) chunks.push(r.value);
  })();
  const errors: unknown[] = [];
  const done = (async () => {
    let message: UIMessage | undefined;
    if (build) for await (const m of readUIMessageStream({ stream: b, onError: (e) => errors.push(e), terminateOnError: false })) message = m;
    else await b.cancel();
    await reading;
    return message;
  })();
  return { chunks, errors, done };
}
