// A drive that ends with nothing to run gives its lease back (releaseIfIdle). A message queued while that
// statement is out finds the drive still registered, so its wake only flags the drive to go on; the release did not
// see the input, and the drive returned anyway: the message waited for the next sweep (2 s in a server, never in a
// test app, whose `host.idle()` then returned with the message unanswered). Shown after a manual compaction, whose
// drive ends this way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import type { LeaseStore } from '../../src/store/leases.ts';

let app: TestApp;
const scope = { tenant: 'local' };

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const turnEnds = async (id: string) => (await app.services.store.log.page(id, -1, 1000)).filter((e) => e.type === 'turn/end').length;

describe('a message queued while its session’s drive gives the lease back', () => {
  it('is run at once: the drive claims the session again for it', async () => {
    const { id } = await app.services.store.createSession(scope, { title: 'released under a message' });
    await app.services.controller.sendMessage(scope, id, 'first');
    await app.services.host.idle();
    expect(await turnEnds(id)).toBe(1);

    // The next release of this session's lease: a message is queued (and its wake made) once the statement is done.
    const leases = (app.services.host as unknown as { leases: LeaseStore }).leases;
    const releaseIfIdle = leases.releaseIfIdle.bind(leases);
    let queued: Promise<unknown> | undefined;
    leases.releaseIfIdle = async (lease) => {
      const outcome = await releaseIfIdle(lease);
      if (lease.sessionId === id && !queued) {
        queued = app.services.controller.sendMessage(scope, id, 'second');
        await queued;
      }
      return outcome;
    };
    try {
      // A manual compaction's drive runs nothing after the summary: it ends by giving the lease back.
      await app.services.controller.compactSession(scope, id, {});
      await waitFor(() => queued !== undefined, { what: 'the release' });
      await waitFor(async () => (await turnEnds(id)) === 2, { what: 'the second message to be answered', timeoutMs: 10_000 });
    } finally {
      leases.releaseIfIdle = releaseIfIdle;
    }
  });
});
