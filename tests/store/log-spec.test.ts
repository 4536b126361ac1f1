// The log contract rows (tests/spec/log-spec.ts) against the SessionStore itself:
// appends checked by the one reducer, reads through lineage, deletion.
import { openDatabase, type Database } from '../../src/db/database.ts';
import { ForklineError } from '../../src/core/errors.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { logSpec, type Refusal } from '../spec/log-spec.ts';

const scope = { tenant: 'local' };
let db: Database;
let store: SessionStore;

const refusal = (err: unknown): Refusal => {
  if (!(err instanceof ForklineError)) throw err;
  const { rule, seq } = (err.details ?? {}) as { rule?: string; seq?: number };
  return { code: err.code, ...(rule === undefined ? {} : { rule, seq }) };
};

logSpec('SessionStore', {
  async setup() {
    db = openDatabase(await createTestDatabase(), { max: 5 });
    store = new SessionStore(db.pool, toolEffectOf);
  },
  teardown: () => db.close(),
  createSession: async () => (await store.createSession(scope, {})).id,
  append: (id, events, opts) => store.append(id, events, { ...opts, scope }).then(() => undefined, refusal),
  page: (id, afterSeq, first) => store.log.page(id, afterSeq, first),
  async counters(id) {
    const s = await store.getSession(scope, id);
    return s && { eventCount: s.eventCount, turnCount: s.turnCount, pendingInputCount: s.pendingInputCount, status: s.status };
  },
  fork: async (id, atSeq) => (await store.fork(scope, id, atSeq)).session.id,
  deleteSession: (id, withDescendants) => store.deleteSession(scope, id, { withDescendants }).catch(refusal),
});
