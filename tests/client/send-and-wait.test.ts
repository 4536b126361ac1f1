// `forkline send --wait` (client/send-and-wait.ts): the answer printed once,
// whole, as it streams; the turn found by its inputId; no sleeps and no polls.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createForklineClient } from '@forkline/client';
import { sendAndWait } from '../../client/send-and-wait.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

describe('send --wait', () => {
  it('prints the answer once, streamed, and returns when its turn ends, without timers', async () => {
    const client = createForklineClient({ url: app.url });
    const { id } = await app.services.store.createSession({ tenant: 'local' }, { title: 'wait' });
    // A queued message first: the turn that takes ours is not the next one started.
    await app.services.controller.sendMessage({ tenant: 'local' }, id, '!slow 30\nfirst in line');
    const written: string[] = [];
    const timersFromHere: string[] = [];
    const realSetTimeout = globalThis.setTimeout;
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => (written.push(String(chunk)), true));
    const timers = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((fn: () => void, ms?: number, ...args: unknown[]) => {
      const stack = new Error().stack ?? '';
      if (stack.includes('send-and-wait.ts')) timersFromHere.push(stack);
      return realSetTimeout(fn, ms, ...args);
    }) as typeof setTimeout);
    let reason: string;
    try {
      reason = await sendAndWait(client, id, '!slow 20\nthe second message', false);
    } finally {
      write.mockRestore();
      timers.mockRestore();
      await client.close();
    }
    expect(reason).toBe('completed');
    expect(written.join('')).toBe('Echo: the second message\n');
    expect(timersFromHere).toEqual([]);
  });
});
