// An AG-UI run to a client that stops reading (docs/operations.md "Memory and
// time"): the run writes only as its client reads, so a long answer waits in
// the log (and the turn updates' bounded queue) instead of in this process's
// socket buffer. Once the client reads again it gets the whole run, in order:
// the answer's text is the stored one, whatever deltas were merged or dropped
// meanwhile, and the run finishes.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventType } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { waitFor } from '../helpers/wait.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

describe('an AG-UI run to a client that stops reading', () => {
  it('waits for the client, then gives it the whole run: every event parsed, the stored answer, RUN_FINISHED', async () => {
    // An echo of 60,000 words: tens of thousands of text deltas, megabytes of events, more than the socket buffers hold.
    const text = Array.from({ length: 60_000 }, (_, i) => `w${i % 10}`).join(' ');
    const body = JSON.stringify({
      threadId: 'slow-reader',
      runId: 'run-slow',
      state: {},
      messages: [{ id: 'u-1', role: 'user', content: text }],
      tools: [],
      context: [],
      forwardedProps: {},
    });
    const url = new URL(app.url.replace(/\/graphql$/, '/agui'));
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' } }, resolve);
      req.on('error', reject);
      req.end(body);
    });
    expect(res.statusCode).toBe(200);
    res.pause(); // reads nothing while the turn runs to its end

    // The turn ends in the log while the client reads nothing.
    const sessionId: string = await waitFor(async () => {
      const d = await app.ok('{ sessions(first: 10) { edges { node { id title } } } }');
      return d.sessions.edges.find((e: any) => e.node.title === 'AG-UI thread slow-reader')?.node.id;
    });
    await waitFor(async () => (await app.services.store.log.page(sessionId, -1, 10_000)).some((e) => e.type === 'turn/end'), { timeoutMs: 60_000 });

    let raw = '';
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => (raw += chunk));
    res.resume();
    await new Promise<void>((resolve) => res.on('end', resolve));

    const events = raw
      .split('\n\n')
      .filter((block) => block.startsWith('data: '))
      .map((block) => JSON.parse(block.slice('data: '.length)));
    expect(events[0].type).toBe(EventType.RUN_STARTED);
    expect(events.at(-1).type).toBe(EventType.RUN_FINISHED);
    const answer = events
      .filter((e) => e.type === EventType.TEXT_MESSAGE_CONTENT)
      .map((e) => e.delta)
      .join('');
    const stored = (await app.services.store.log.page(sessionId, -1, 10_000)).filter((e) => e.type === 'model/message').at(-1)!;
    expect(answer).toBe(anyData(stored).text);
    expect(answer.length).toBeGreaterThan(text.length);
  }, 120_000);
});
