// Fair agent slots: one tenant's slow turns take at most its share
// of a process's slots, so another tenant's message is answered while they
// run; sessions left waiting start when a slot frees; a turn running past the
// maximum turn duration ends `failed` and gives its slot back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { waitFor } from '../helpers/wait.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import { loadConfig } from '../../src/config.ts';
import { FakeClock } from '../helpers/fake-clock.ts';

const SLOW = '!call sleep {"ms": 600000}';

/** GraphQL as one tenant, failing the test on any error. */
const caller = (app: () => TestApp, who: Record<string, string>) => async (query: string, variables?: Record<string, unknown>) => {
  const r = await app().gql(query, variables, who);
  if (r.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(r.errors)}`);
  return r.data;
};

const SESSION = `query($id: ID!) { session(id: $id) { status turnCount pendingInputs { inputId } turns { reason } events(first: 100) { edges { node { type data } } } } }`;

describe('a tenant holds at most its share of the slots', () => {
  let app: TestApp;
  const asA = caller(() => app, A);
  const asB = caller(() => app, B);
  const sessionOf = async (as: typeof asA, id: string) => (await as(SESSION, { id })).session;
  const statesOf = (ids: string[]) => Promise.all(ids.map((id) => sessionOf(asA, id)));
  const running = async (ids: string[]) => (await statesOf(ids)).filter((s) => s.status === 'RUNNING').length;

  beforeAll(async () => {
    // Four slots, two tenants: each may hold two (the default share: half).
    app = await startTwoTenantApp({
      maxActiveSessions: 4,
      toolTimeoutMs: 600_000,
    });
  });
  afterAll(() => app?.close());

  it("another tenant's message is answered while one tenant's slow turns fill its share; its waiting sessions start when its slots free", async () => {
    const { createSession } = await asA('mutation { createSession(input: { title: "A" }) { id } }');
    const { fanOut } = await asA('mutation($id: ID!, $v: [FanOutVariantInput!]!) { fanOut(input: { sessionId: $id, variants: $v }) { children { id } } }', {
      id: createSession.id,
      v: Array.from({ length: 4 }, (_, i) => ({ title: `slow ${i}`, message: SLOW })),
    });
    const slow: string[] = fanOut.children.map((c: { id: string }) => c.id);
    await waitFor(async () => (await running(slow)) === 2, { what: "two of tenant A's turns running" });

    const { createSession: b } = await asB('mutation { createSession(input: { title: "B" }) { id } }');
    await asB('mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "hello from B" }) { inputId } }', { id: b.id });
    const answered = await waitFor(
      async () => {
        const s = await sessionOf(asB, b.id);
        return s.status === 'IDLE' && s.turnCount === 1 && s;
      },
      { what: "tenant B's turn" },
    );
    expect(answered.turns).toEqual([{ reason: 'completed' }]);

    // A still holds exactly its share: two turns running (none ended), two sessions waiting with their input.
    const states = await statesOf(slow);
    const [busy, waiting] = [states.filter((s) => s.status === 'RUNNING'), states.filter((s) => s.status === 'IDLE')];
    expect(busy).toHaveLength(2);
    for (const s of busy) expect(s.turns).toEqual([{ reason: null }]);
    expect(waiting).toHaveLength(2);
    for (const s of waiting) expect([s.turnCount, s.pendingInputs.length]).toEqual([0, 1]);

    // Nothing is lost: as A's running turns are cancelled, its waiting sessions take the freed slots.
    const cancel = (id: string) => asA('mutation($id: ID!) { cancelTurn(sessionId: $id) { id } }', { id });
    const cancelRunning = async () => {
      const ids = slow.filter((_, i) => states[i].status === 'RUNNING');
      for (const id of ids) await cancel(id);
      return ids;
    };
    const first = await cancelRunning();
    await waitFor(
      async () => {
        const now = await statesOf(slow);
        return now.filter((s) => s.turnCount === 1 && s.status === 'RUNNING').length === 2 && now.every((s) => s.turnCount === 1);
      },
      { what: "A's waiting sessions to start" },
    );
    const second = slow.filter((id) => !first.includes(id));
    for (const id of second) await cancel(id);
    await waitFor(async () => (await statesOf(slow)).every((s) => s.status === 'IDLE'), { what: "A's turns to end" });
    for (const s of await statesOf(slow)) expect([s.turns, s.pendingInputs]).toEqual([[{ reason: 'cancelled' }], []]);
  });
});

describe('the maximum turn duration', () => {
  let app: TestApp;
  const asA = caller(() => app, A);
  // An hour, on a clock the test moves: the limit is read from the host's clock, not waited for.
  const LIMIT_MS = 3_600_000;
  const clock = new FakeClock();
  const sessionOf = async (id: string) => (await asA(SESSION, { id })).session;

  beforeAll(async () => {
    // One slot: the second session can only run once the first one's turn gave it back.
    app = await startTwoTenantApp({
      maxActiveSessions: 1,
      maxTurnMs: LIMIT_MS,
      clock,
      toolTimeoutMs: 600_000,
    });
  });
  afterAll(() => app?.close());

  it('a turn running past it ends failed, saying why, and frees its slot for the session waiting', async () => {
    const ids: string[] = [];
    for (const title of ['first', 'second']) {
      const { createSession } = await asA('mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title });
      await asA('mutation($id: ID!, $text: String!) { sendMessage(input: { sessionId: $id, text: $text }) { inputId } }', { id: createSession.id, text: SLOW });
      ids.push(createSession.id);
    }
    // One at a time: each turn is stopped once the clock passes its limit, and the next takes the slot.
    for (const id of ids) {
      await waitFor(async () => (await sessionOf(id)).status === 'RUNNING', { what: 'the turn to run' });
      await clock.advance(LIMIT_MS);
    }
    const ended = await waitFor(
      async () => {
        const all: any[] = await Promise.all(ids.map(async (id) => (await asA(SESSION, { id })).session));
        return all.every((s) => s.status === 'IDLE' && s.turnCount === 1) ? all : undefined;
      },
      { what: 'both turns to end' },
    );
    for (const s of ended) {
      expect(s.turns).toEqual([{ reason: 'failed' }]);
      const tail = s.events.edges.map((e: any) => e.node).slice(-3);
      expect(tail).toEqual([
        { type: 'step/end', data: { turn: 1, step: 1, reason: 'interrupted' } },
        { type: 'plugin/agent/error', data: { turn: 1, step: 1, message: `the turn ran longer than its limit of ${LIMIT_MS} ms and was stopped` } },
        { type: 'turn/end', data: { turn: 1, reason: 'failed' } },
      ]);
    }
  });
});

describe('claims of waiting sessions', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(() => app?.close());

  it("go first to the tenant holding fewest slots, and never past a tenant's share", async () => {
    const waiting = async (tenant: string) => {
      const { id } = await app.services.store.createSession({ tenant }, { title: tenant });
      await app.services.store.append(id, [{ type: 'inbox/add', data: { inputId: `in_${id}`, text: 'hi' } }]);
      return id;
    };
    const alpha = [await waiting('alpha'), await waiting('alpha'), await waiting('alpha')];
    const beta = await waiting('beta'); // the newest
    const claims = new LeaseStore(app.db.pool, 'another-process', 60_000);
    // alpha holds one slot there, beta none: beta's session goes first, although alpha's waited longer.
    const first = await claims.claimRunnable(1, [], { perTenant: 3, held: new Map([['alpha', 1]]) });
    expect(first.map((l) => [l.sessionId, l.tenant])).toEqual([[beta, 'beta']]);
    // Room for three more, but alpha may hold three: two more of its sessions, the oldest.
    const next = await claims.claimRunnable(3, [], {
      perTenant: 3,
      held: new Map([
        ['alpha', 1],
        ['beta', 1],
      ]),
    });
    expect(next.map((l) => l.sessionId).sort()).toEqual(alpha.slice(0, 2).sort());
  });
});

describe('configuration', () => {
  it('takes the share per tenant and the turn limit from the environment, refusing limits a timer cannot keep', () => {
    const c = loadConfig({ FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT: '10', FORKLINE_MAX_TURN_MS: '60000' });
    expect([c.FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT, c.FORKLINE_MAX_TURN_MS]).toEqual([10, 60_000]);
    expect(loadConfig({ FORKLINE_MAX_TURN_MS: '0' }).FORKLINE_MAX_TURN_MS).toBe(0);
    for (const bad of ['500', String(2 ** 31)]) expect(() => loadConfig({ FORKLINE_MAX_TURN_MS: bad })).toThrow(/FORKLINE_MAX_TURN_MS/);
    expect(() => loadConfig({ FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT: '0' })).toThrow(/FORKLINE_MAX_ACTIVE_SESSIONS_PER_TENANT/);
  });
});
