// The log contract rows (tests/spec/log-spec.ts) over HTTP: reads, forks and
// deletion through GraphQL. GraphQL has no raw append (clients write through
// sendMessage and the agent), so the rows' batches go through the app's store.
import { ForklineError } from '../../src/core/errors.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { graphqlLogReads } from '../helpers/graphql-log-reads.ts';
import { refusalOf } from '../helpers/runner-batches.ts';
import { logSpec } from '../spec/log-spec.ts';

let app: TestApp;
const scope = { tenant: 'local' };

/** The first error's code, and the rule and seq it names. */
logSpec('GraphQL API', {
  setup: async () => void (app = await startTestApp()),
  teardown: () => app.close(),
  createSession: async () => (await app.ok('mutation { createSession(input: {}) { id } }')).createSession.id,
  append: (id, events, opts) =>
    app.services.store.append(id, events, { ...opts, scope }).then(
      () => undefined,
      (err) => {
        if (!(err instanceof ForklineError)) throw err;
        return refusalOf([{ extensions: { code: err.code, ...err.details } }]);
      },
    ),
  ...graphqlLogReads(() => app),
  async fork(id, atSeq) {
    const r = await app.ok('mutation($input: ForkSessionInput!) { forkSession(input: $input) { session { id } } }', { input: { sessionId: id, atSeq } });
    return r.forkSession.session.id;
  },
});
