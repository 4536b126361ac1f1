// The service as `npm start` runs it takes how long a silent WebSocket is kept
// from its environment (docs/operations.md: FORKLINE_WS_SILENCE_TIMEOUT_MS,
// FORKLINE_WS_CLOSE_GRACE_MS). With the defaults (60 s, then 5 minutes) a
// client that stops reading holds its socket for up to six minutes.
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';

let service: ServiceProcess;
beforeAll(async () => {
  service = await startService({ env: { FORKLINE_WS_SILENCE_TIMEOUT_MS: '1000', FORKLINE_WS_CLOSE_GRACE_MS: '1000' } });
}, 90_000);
afterAll(async () => {
  await service?.stop();
});

/** The service's count of sockets closed for silence. */
async function silentClosed(): Promise<number> {
  const text = await (await fetch(service.url.replace(/\/graphql$/, '/metrics'))).text();
  return Number(/^forkline_ws_unresponsive_closed_total (\d+)/m.exec(text)?.[1] ?? 0);
}

describe('a WebSocket client that stops reading, under npm start', () => {
  it('is closed after FORKLINE_WS_SILENCE_TIMEOUT_MS as set, not the 60 s default', async () => {
    const before = await silentClosed();
    const ws = new WebSocket(service.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    ws.on('error', () => {});
    try {
      await new Promise<void>((resolve) => ws.once('open', () => resolve()));
      ws.send(JSON.stringify({ type: 'connection_init', payload: {} }));
      await new Promise<void>((resolve) => ws.once('message', () => resolve()));
      ws.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: 'subscription { sessionListChanges { listening } }' } }));
      // The client's TCP socket stops reading: its pongs never go, nothing is taken.
      (ws as unknown as { _socket: net.Socket })._socket.pause();
      // Silence is checked at each ping (every 12 s): the close comes at the first check after a second of it.
      await waitFor(async () => (await silentClosed()) === before + 1, { timeoutMs: 40_000, intervalMs: 500, what: 'the silent socket closed' });
      // Reading again, the client finds the close frame queued for it: the code and the reason, not 1006.
      const closed = new Promise<[number, string]>((resolve) => ws.once('close', (code, reason) => resolve([code, reason.toString()])));
      (ws as unknown as { _socket: net.Socket })._socket.resume();
      const [code, reason] = await closed;
      expect(code).toBe(4408);
      expect(reason).toMatch(/^no answer to pings and nothing read for 1 s/);
    } finally {
      ws.terminate();
    }
  }, 60_000);
});
