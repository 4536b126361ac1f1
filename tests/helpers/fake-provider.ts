// A fake model provider for tests of what a provider's answer makes forkline
// do: each request it gets is answered by the next handler the test queued
// (500 when none is), which is told once its client has gone.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export type Sent = { closed: boolean };
export type ProviderHandler = (res: http.ServerResponse, sent: Sent) => Promise<void>;

export interface FakeProvider {
  /** The answers to the next requests, in order. */
  handlers: ProviderHandler[];
  /** http://127.0.0.1:<port> */
  origin: string;
  close(): Promise<void>;
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const handlers: ProviderHandler[] = [];
  const server = http.createServer(async (req, res) => {
    for await (const _ of req);
    const sent = { closed: false };
    res.on('close', () => (sent.closed = true));
    const handler = handlers.shift();
    if (!handler) return void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":{"message":"no scripted reply"}}');
    await handler(res, sent).catch(() => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    handlers,
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** The test app's providers, each at its own path of a fake server's origin (`base`), with a key of its own. */
export function providersAt(base: string, keys: { openaiCompatible?: string } = {}) {
  return {
    openai: { baseUrl: `${base}/openai/v1`, apiKey: 'sk-openai' },
    anthropic: { baseUrl: `${base}/anthropic/v1`, apiKey: 'sk-anthropic' },
    google: { baseUrl: `${base}/google/v1beta`, apiKey: 'sk-google' },
    openaiCompatible: { baseUrl: `${base}/compat/v1`, apiKey: keys.openaiCompatible ?? 'sk-compat' },
  };
}
