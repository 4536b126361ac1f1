// The fork contract rows (tests/spec/fork-spec.ts) against SessionStore.fork itself:
// no host, no agent, so the child's log is exactly its seed.
import { openDatabase } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { storeForkSpec } from '../helpers/store-specs.ts';
import { forkSpec } from '../spec/fork-spec.ts';

forkSpec(
  'SessionStore',
  storeForkSpec(async () => {
    const db = openDatabase(await createTestDatabase(), { max: 5 });
    return { store: new SessionStore(db.pool, toolEffectOf), close: () => db.close() };
  }),
);
