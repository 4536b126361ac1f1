// A fork reads its parent from one REPEATABLE READ snapshot. A lease renewal
// (which locked the row FOR UPDATE) or a delete committed on the parent row
// after that snapshot made the child's parent-key check fail with a
// serialization failure (40001): the fork answered INTERNAL_SERVER_ERROR.
// Now renewals and claims lock rows FOR NO KEY UPDATE
// (no conflict with a child's key check), and a fork that conflicts all the
// same runs again from a new snapshot: it succeeds, or answers
// SESSION_NOT_FOUND when the parent is gone. The races are forced: the fork
// is held past its snapshot (a lock on the Event table, or the delete's own
// open transaction) while the other side commits.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { REFERENCE_LOG } from '../spec/reference-log.ts';
import { LeaseStore } from '../../src/store/leases.ts';

let app: TestApp;
const scope = { tenant: 'local' };

beforeAll(async () => {
  app = await startTestApp({ leaseTtlMs: 600 });
});
afterAll(() => app.close());

const FORKS: Record<string, { query: string; vars: (id: string, inputId: string) => Record<string, unknown>; child: (d: any) => string }> = {
  forkSession: {
    query: `mutation($input: ForkSessionInput!) { forkSession(input: $input) { session { id } } }`,
    vars: (sessionId) => ({ input: { sessionId, atSeq: 5 } }),
    child: (d) => d.forkSession.session.id,
  },
  branchSession: {
    query: `mutation($input: BranchSessionInput!) { branchSession(input: $input) { session { id } } }`,
    vars: (sessionId) => ({ input: { sessionId, anchorSeq: 3 } }),
    child: (d) => d.branchSession.session.id,
  },
  editMessage: {
    query: `mutation($input: EditMessageInput!) { editMessage(input: $input) { session { id } } }`,
    vars: (sessionId, inputId) => ({ input: { sessionId, inputId, text: 'again' } }),
    child: (d) => d.editMessage.session.id,
  },
  fanOut: {
    query: `mutation($input: FanOutInput!) { fanOut(input: $input) { children { id } } }`,
    vars: (sessionId) => ({ input: { sessionId, atSeq: 5, variants: [{ message: 'a' }, { message: 'b' }] } }),
    child: (d) => d.fanOut.children[0].id,
  },
};

async function parent(): Promise<{ id: string; inputId: string }> {
  const id = (await app.services.store.createSession(scope, { title: 'parent' })).id;
  await app.services.store.append(id, REFERENCE_LOG);
  const added = REFERENCE_LOG.find((e) => e.type === 'inbox/add')!;
  return { id, inputId: (added.data as { inputId: string }).inputId };
}

/** Backends of this database waiting for a lock (the fork, on its parent row). */
async function waitingOnLocks(): Promise<number> {
  const { rows } = await app.db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
  );
  return rows[0].n;
}

/** Runs `mutation` inside `holder`, which changes the parent once the fork waits on it, past its snapshot. */
async function raced(holder: (during: () => Promise<void>) => Promise<void>, mutation: () => Promise<Awaited<ReturnType<TestApp['gql']>>>) {
  let answer!: Promise<Awaited<ReturnType<TestApp['gql']>>>;
  await holder(async () => {
    let settled = false;
    answer = mutation().finally(() => (settled = true));
    // (An answer before it waits fails the test below, with the answer to show.)
    await waitFor(async () => settled || (await waitingOnLocks()) > 0, { what: 'the fork to wait on its parent row', timeoutMs: 5000 });
  });
  return answer;
}

describe('forks racing writes to their parent row', () => {
  for (const [name, op] of Object.entries(FORKS)) {
    it(`${name}: a lease claimed and renewed after the fork's snapshot does not fail it`, async () => {
      const p = await parent();
      const other = new LeaseStore(app.db.pool, 'another-process', 600);
      const conn = await app.db.pool.connect();
      try {
        const r = await raced(
          async (during) => {
            // The fork has its snapshot (its first statement reads the parent row) and waits to read events.
            await conn.query('BEGIN');
            await conn.query('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
            await during();
            const lease = await other.claim(p.id);
            expect(lease).not.toBeNull();
            expect((await other.renew([lease!])).held).toEqual(new Set([p.id]));
            await conn.query('COMMIT');
          },
          () => app.gql(op.query, op.vars(p.id, p.inputId)),
        );
        expect(r.errors).toBeUndefined();
        const child = await app.ok(`query($id: ID!) { session(id: $id) { parent { id } } }`, { id: op.child(r.data) });
        expect(child.session.parent.id).toBe(p.id);
      } finally {
        conn.release();
      }
    });

    it(`${name}: a fork racing the delete of its parent answers SESSION_NOT_FOUND`, async () => {
      const p = await parent();
      const r = await raced(
        // The delete's own transaction: the row is deleted, not yet committed, when the fork reaches it.
        (during) => app.services.store.deleteSession(scope, p.id, { beforeCommit: () => during() }).then(() => {}),
        () => app.gql(op.query, op.vars(p.id, p.inputId)),
      );
      expect((r.data as Record<string, unknown> | undefined)?.[name] ?? null).toBeNull();
      expect(r.errors?.map((e) => e.extensions?.code)).toEqual(['SESSION_NOT_FOUND']);
      expect(r.errors?.[0].message).toContain(p.id);
    });
  }
});

describe('forks racing lease renewals and the delete of their parent, unforced', () => {
  it('every fork succeeds or answers SESSION_NOT_FOUND, and no child outlives the parent', async () => {
    for (let round = 0; round < 3; round++) {
      const p = await parent();
      const other = new LeaseStore(app.db.pool, 'another-process', 600);
      const lease = (await other.claim(p.id))!;
      let racing = true;
      const heartbeat = (async () => {
        while (racing) await other.renew([lease]);
      })();
      const answers: Array<Awaited<ReturnType<TestApp['gql']>>> = [];
      const forker = async () => {
        for (let i = 0; i < 10; i++) answers.push(await app.gql(FORKS.forkSession.query, FORKS.forkSession.vars(p.id, p.inputId)));
      };
      const deleted = (async () => {
        await waitFor(() => answers.length >= 5, { what: 'some forks first' });
        return app.gql(`mutation($id: ID!) { deleteSession(id: $id, withDescendants: true) { deletedSessionIds } }`, { id: p.id });
      })();
      await Promise.all([forker(), forker(), forker(), forker()]);
      racing = false;
      await heartbeat;
      const del = await deleted;
      expect(del.errors).toBeUndefined();
      const codes = answers.map((a) => a.errors?.map((e) => e.extensions?.code).join() ?? 'ok');
      expect(codes.filter((c) => c !== 'ok' && c !== 'SESSION_NOT_FOUND')).toEqual([]);
      expect(codes).toContain('SESSION_NOT_FOUND');
      const { rows } = await app.db.pool.query('SELECT id FROM "Session" WHERE "parentId" = $1 OR id = $1', [p.id]);
      expect(rows).toEqual([]);
    }
  });
});
