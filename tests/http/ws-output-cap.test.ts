// A WebSocket whose queued output passes its cap is closed by its own send
// (http/ws-output-cap.ts), whichever writer sent: graphql-ws executing each
// event, or the direct writer (http/graphql/ws-delivery.ts). The cap here is
// below the direct writer's own high-water mark, so that writer passes it too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { stalledSocket } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';

const CAP = 256 * 1024;
let app: TestApp;
let sessionId: string;

beforeAll(async () => {
  app = await startTestApp({ security: { wsMaxBufferedBytes: CAP } });
  sessionId = (await app.services.store.createSession({ tenant: 'local' }, { title: 'big events' })).id;
  const filler = 'x'.repeat(100_000);
  await app.services.store.append(
    sessionId,
    Array.from({ length: 50 }, () => ({ type: 'plugin/test/blob', data: { filler } })),
  );
});
afterAll(() => app.close());

const tooSlowClosed = async () => (await app.metrics.tooSlowSockets.get()).values[0]?.value ?? 0;

describe('a WebSocket past its queued-output cap', () => {
  // 20 × 50 × 100 kB: more than the kernel's socket buffers can hide from the server.
  it.each([
    ['the direct writer', 'seq data', true],
    ['graphql-ws', 'seq data @include(if: true)', false], // a directive: graphql-ws executes each event
  ])(
    'is closed with 4408 and SUBSCRIBER_TOO_SLOW when %s fills it',
    async (_writer, selection, direct) => {
      const framesBefore = app.server.wsDelivery.counts.frames;
      const before = await tooSlowClosed();
      const { socket, closed } = await stalledSocket(app.url, sessionId, 20, selection);
      await waitFor(async () => (await tooSlowClosed()) > before, { what: 'the server to close it', timeoutMs: 30_000 });
      socket.resume();
      expect(await closed).toEqual({ code: 4408, reason: `SUBSCRIBER_TOO_SLOW: over ${CAP} bytes queued` });
      expect(await tooSlowClosed()).toBe(before + 1);
      // The writer named is the one that wrote.
      expect(app.server.wsDelivery.counts.frames > framesBefore).toBe(direct);
    },
    60_000,
  );
});
