// A batch claim counts the slots when it starts (store/leases.ts claimRunnable):
// turns that end while its statement runs free slots it did not count. The
// queued input its tenant's share kept it from taking must still be claimed
// when slots free, without a sweep (none runs here): the test holds each claim
// until a turn has ended under it, the order that stranded queued input.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import type { LeaseStore } from '../../src/store/leases.ts';

let app: TestApp;
const scope = { tenant: 'local' };

beforeAll(async () => {
  app = await startTestApp({ maxActiveSessions: 4, maxActiveSessionsPerTenant: 2 });
});
afterAll(() => app.close());

const create = async (title: string) => (await app.services.store.createSession(scope, { title })).id;
const send = (id: string, text: string) => app.services.controller.sendMessage(scope, id, text);
const answered = async (id: string) =>
  (await app.db.pool.query(`SELECT "turnCount" = 1 AND status = 'IDLE' AS done FROM "Session" WHERE id = $1`, [id])).rows[0].done === true;

/** Holds the host's batch claims one at a time until `release`; the first `count` only. */
function holdClaims(count: number) {
  const leases = (app.services.host as unknown as { leases: LeaseStore }).leases;
  const claim = leases.claimRunnable.bind(leases);
  const waiting: Array<() => void> = [];
  let held = 0;
  leases.claimRunnable = async (...args) => {
    if (held < count) {
      held++;
      await new Promise<void>((resolve) => waiting.push(resolve));
    }
    return claim(...args);
  };
  return {
    started: () => held,
    release: () => waiting.shift()?.(),
  };
}

describe('a batch claim while turns end', () => {
  it("queued input its tenant's share held back is claimed once slots free, though the turns freeing them ended while a claim ran", async () => {
    const [fast, slow, third, fourth] = await Promise.all(['fast', 'slow', 'third', 'fourth'].map(create));
    // Two turns take the tenant's two slots: one ends soon, the other later.
    await send(fast, '!call sleep {"ms": 300}');
    await send(slow, '!call sleep {"ms": 4000}');
    await waitFor(() => app.services.host.isRunningHere(fast) && app.services.host.isRunningHere(slow), { what: 'both turns running' });

    const claims = holdClaims(2);
    // No slot for these: queued, announced, and a batch claim starts counting the tenant at its share.
    await send(third, 'hello');
    await send(fourth, 'hello');
    await waitFor(() => claims.started() === 1, { what: 'a batch claim counting the tenant at its share' });

    // The fast turn ends under it; released, it takes nothing (its count said the share was full).
    await waitFor(() => answered(fast), { what: 'the fast turn' });
    claims.release();
    // The next claim counts one slot taken: the share leaves it room for one session.
    await waitFor(() => claims.started() === 2, { what: 'a second batch claim' });
    expect(app.services.host.isRunningHere(slow)).toBe(true); // else this run did not reproduce the order
    await waitFor(() => answered(slow), { what: 'the slow turn', timeoutMs: 20_000 });
    claims.release();

    // Both queued messages are answered: the slots the ended turns freed were claimed again.
    await waitFor(async () => (await answered(third)) && (await answered(fourth)), { what: 'both queued messages answered', timeoutMs: 15_000 });
  });
});
