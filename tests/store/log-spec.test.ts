// The log contract rows (tests/spec/log-spec.ts) against the SessionStore itself:
// appends checked by the one reducer, reads through lineage, deletion.
import { openDatabase } from '../../src/db/database.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { storeLogSpec } from '../helpers/store-specs.ts';
import { logSpec } from '../spec/log-spec.ts';

logSpec(
  'SessionStore',
  storeLogSpec(async () => {
    const db = openDatabase(await createTestDatabase(), { max: 5 });
    return { store: new SessionStore(db.pool, toolEffectOf), close: () => db.close() };
  }),
);
