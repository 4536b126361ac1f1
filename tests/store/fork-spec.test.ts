// The fork contract rows (tests/spec/fork-spec.ts) against SessionStore.fork itself:
// no host, no agent, so the child's log is exactly its seed.
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { forkSpec } from '../spec/fork-spec.ts';

const scope = { tenant: 'local' };
let db: Database;
let store: SessionStore;

forkSpec('SessionStore', {
  async setup() {
    db = openDatabase(await createTestDatabase(), { max: 5 });
    store = new SessionStore(db.pool, toolEffectOf);
  },
  teardown: () => db.close(),
  async createParent(events) {
    const { id } = await store.createSession(scope, {});
    await store.append(id, events);
    return { id, events: await store.log.page(id, -1, 1000) };
  },
  async fork(parent, cut) {
    const f = await store.fork(scope, parent.id, 'atSeq' in cut ? cut.atSeq : cut);
    // The returned row is read after the commit: the counters the store keeps for the child.
    return { id: f.session.id, events: await store.log.page(f.session.id, -1, 1000), cutSeq: f.cutSeq, counters: f.session, syntheticEvents: f.syntheticEvents };
  },
});
