// The log contract rows (tests/spec/log-spec.ts) through the runner protocol:
// sessions of an external runner pool, each batch appended with appendEvents
// under a lease claimed with claimSession, conditional on the log's length.
// inbox/add is the service's to write (sendMessage), never a runner's: those
// events go through the app's store, everything else through GraphQL.
import type { NewEvent } from '../../src/core/events.ts';
import { ForklineError } from '../../src/core/errors.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { graphqlLogReads } from '../helpers/graphql-log-reads.ts';
import { logSpec, type Refusal } from '../spec/log-spec.ts';
import { appendInRuns, refusalOf } from '../helpers/runner-batches.ts';

let app: TestApp;
const scope = { tenant: 'local' };
const POOL = 'spec';
/** The lease token this runner holds, by session. */
const tokens = new Map<string, number>();

async function leaseOf(id: string): Promise<number> {
  const held = tokens.get(id);
  if (held !== undefined) return held;
  const { claimSession } = await app.ok('mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } } }', {
    i: { sessionId: id, runnerId: 'spec-runner', leaseMs: 600_000 },
  });
  tokens.set(id, claimSession.lease.token);
  return claimSession.lease.token;
}

const eventCountOf = async (id: string) => (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id })).session.eventCount as number;

/** One run of events through the runner protocol. */
async function appendEvents(id: string, events: NewEvent[], expectedEventCount: number): Promise<Refusal | undefined> {
  const r = await app.gql('mutation($i: AppendEventsInput!) { appendEvents(input: $i) { eventCount } }', {
    i: { sessionId: id, leaseToken: await leaseOf(id), expectedEventCount, events: events.map(({ type, data }) => ({ type, data })) },
  });
  return r.errors?.length ? refusalOf(r.errors) : undefined;
}

/** inbox/add, as sendMessage writes it: through the service. */
const appendInputs = (id: string, events: NewEvent[], expectedEventCount: number) =>
  app.services.store.append(id, events, { scope, expectedEventCount }).then(
    () => undefined,
    (err) => {
      if (!(err instanceof ForklineError)) throw err;
      return refusalOf([{ extensions: { code: err.code, ...err.details } }]);
    },
  );

logSpec('runner protocol (appendEvents under a lease)', {
  setup: async () => void (app = await startTestApp()),
  teardown: () => app.close(),
  writesSynthetic: false, // RunnerEventInput has no synthetic flag
  createSession: async () => (await app.ok('mutation($p: String!) { createSession(input: { runner: $p }) { id } }', { p: POOL })).createSession.id,
  append: async (id, events, opts) =>
    appendInRuns(events, opts?.expectedEventCount ?? (await eventCountOf(id)), {
      inputs: (run, expected) => appendInputs(id, run, expected),
      runner: (run, expected) => appendEvents(id, run, expected),
    }),
  ...graphqlLogReads(() => app),
  async fork(id, atSeq) {
    const r = await app.ok('mutation($input: ForkSessionInput!) { forkSession(input: $input) { session { id runner } } }', { input: { sessionId: id, atSeq } });
    if (r.forkSession.session.runner !== POOL) throw new Error('a fork of a runner session belongs to its pool');
    return r.forkSession.session.id;
  },
});
