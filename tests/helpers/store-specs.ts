// The log and fork contract rows (tests/spec/) run against a SessionStore with
// no host and no agent: the implementations the store's spec tests use, on a
// store each test file opens its own way (tree-keys.test.ts records its statements).
import { ForklineError } from '../../src/core/errors.ts';
import type { SessionStore } from '../../src/store/session-store.ts';
import type { LogSpecInitializer, Refusal } from '../spec/log-spec.ts';
import type { ForkSpecInitializer } from '../spec/fork-spec.ts';

const scope = { tenant: 'local' };

/** A store under test, and how to close what it runs on. */
export interface OpenStore {
  store: SessionStore;
  close(): Promise<void>;
}

const refusal = (err: unknown): Refusal => {
  if (!(err instanceof ForklineError)) throw err;
  const { rule, seq } = (err.details ?? {}) as { rule?: string; seq?: number };
  return { code: err.code, ...(rule === undefined ? {} : { rule, seq }) };
};

/** The log rows: appends checked by the one reducer, reads through lineage, deletion. */
export function storeLogSpec(open: () => Promise<OpenStore>): LogSpecInitializer {
  let s: OpenStore;
  return {
    async setup() {
      s = await open();
    },
    teardown: () => s.close(),
    createSession: async () => (await s.store.createSession(scope, {})).id,
    append: (id, events, opts) => s.store.append(id, events, { ...opts, scope }).then(() => undefined, refusal),
    page: (id, afterSeq, first) => s.store.log.page(id, afterSeq, first),
    async counters(id) {
      const row = await s.store.getSession(scope, id);
      return row && { eventCount: row.eventCount, turnCount: row.turnCount, pendingInputCount: row.pendingInputCount, status: row.status };
    },
    fork: async (id, atSeq) => (await s.store.fork(scope, id, atSeq)).session.id,
    deleteSession: (id, withDescendants) => s.store.deleteSession(scope, id, { withDescendants }).catch(refusal),
  };
}

/** The fork rows against SessionStore.fork itself: the child's log is exactly its seed. */
export function storeForkSpec(open: () => Promise<OpenStore>): ForkSpecInitializer {
  let s: OpenStore;
  return {
    async setup() {
      s = await open();
    },
    teardown: () => s.close(),
    async createParent(events) {
      const { id } = await s.store.createSession(scope, {});
      await s.store.append(id, events);
      return { id, events: await s.store.log.page(id, -1, 1000) };
    },
    async fork(parent, cut) {
      const f = await s.store.fork(scope, parent.id, 'atSeq' in cut ? cut.atSeq : cut);
      // The returned row is read after the commit: the counters the store keeps for the child.
      return {
        id: f.session.id,
        events: await s.store.log.page(f.session.id, -1, 1000),
        cutSeq: f.cutSeq,
        counters: f.session,
        syntheticEvents: f.syntheticEvents,
      };
    },
  };
}
