// The log contract rows (tests/spec/log-spec.ts) over HTTP: reads, forks and
// deletion through GraphQL. GraphQL has no raw append (clients write through
// sendMessage and the agent), so the rows' batches go through the app's store.
import { ForklineError } from '../../src/core/errors.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { logSpec, type Refusal } from '../spec/log-spec.ts';

let app: TestApp;
const scope = { tenant: 'local' };

/** The first error's code, and the rule and seq it names. */
function refusalOf(errors: Array<{ extensions?: Record<string, any> }>): Refusal {
  const { code, rule, seq } = errors[0].extensions ?? {};
  return { code, ...(rule === undefined ? {} : { rule, seq }) };
}

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
  async page(id, afterSeq, first) {
    const { session } = await app.ok(
      'query($id: ID!, $after: Int, $first: Int) { session(id: $id) { events(afterSeq: $after, first: $first) { edges { node { seq type data inherited synthetic } } } } }',
      { id, after: afterSeq < 0 ? null : afterSeq, first },
    );
    return session.events.edges.map((e: any) => e.node);
  },
  async counters(id) {
    const { session } = await app.ok('query($id: ID!) { session(id: $id) { eventCount turnCount status pendingInputs { inputId } } }', { id });
    return session && { eventCount: session.eventCount, turnCount: session.turnCount, pendingInputCount: session.pendingInputs.length, status: session.status };
  },
  async fork(id, atSeq) {
    const r = await app.ok('mutation($input: ForkSessionInput!) { forkSession(input: $input) { session { id } } }', { input: { sessionId: id, atSeq } });
    return r.forkSession.session.id;
  },
  async deleteSession(id, withDescendants) {
    const r = await app.gql('mutation($id: ID!, $all: Boolean) { deleteSession(id: $id, withDescendants: $all) { deletedSessionIds } }', {
      id,
      all: withDescendants ?? null,
    });
    return r.errors?.length ? refusalOf(r.errors) : r.data.deleteSession.deletedSessionIds;
  },
});
