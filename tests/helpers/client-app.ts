import { afterAll, beforeAll } from 'vitest';
import WebSocket from 'ws';
import { createForklineClient, type ForklineClient } from '@forkline/client';
import { startTestApp, type TestApp } from './app.ts';

/** A test app and the typed client of it, for one file's tests: started before them, closed after. */
export function useClientApp(): { readonly app: TestApp; readonly client: ForklineClient } {
  const held = {} as { app: TestApp; client: ForklineClient };
  beforeAll(async () => {
    held.app = await startTestApp();
    held.client = createForklineClient({ url: held.app.url, webSocketImpl: WebSocket });
  });
  afterAll(async () => {
    await held.client?.close();
    await held.app?.close();
  });
  return held;
}
