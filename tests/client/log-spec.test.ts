// The log contract rows (tests/spec/log-spec.ts) through the typed client
// (@forkline/client) with the documents of client/operations: sessions of an
// external runner pool written as a runner writes them (claimSession, then
// appendEvents under the lease; inbox/add through the service), read, forked
// and deleted through the client's own operations.
import WebSocket from 'ws';
import {
  AppendStepDocument,
  ClaimSessionDocument,
  createForklineClient,
  CreateSessionDocument,
  DashboardSessionDocument,
  DeleteSessionDocument,
  ForkSessionDocument,
  ForklineClientError,
  SessionEventsDocument,
  type ForklineClient,
} from '@forkline/client';
import { ForklineError } from '../../src/core/errors.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { appendInRuns, refusalOf } from '../helpers/runner-batches.ts';
import { logSpec, type Refusal } from '../spec/log-spec.ts';

let app: TestApp;
let client: ForklineClient;
const scope = { tenant: 'local' };
const POOL = 'client-spec';
const tokens = new Map<string, number>();

/** The client's refusal, as the spec compares them (anything else is a failure of the test). */
async function refused<T>(call: Promise<T>): Promise<Refusal | undefined> {
  try {
    await call;
    return undefined;
  } catch (err) {
    if (!(err instanceof ForklineClientError)) throw err;
    return refusalOf(err.errors);
  }
}

async function leaseOf(sessionId: string): Promise<number> {
  const held = tokens.get(sessionId);
  if (held !== undefined) return held;
  const { claimSession } = await client.mutate(ClaimSessionDocument, { input: { sessionId, runnerId: 'client-spec', leaseMs: 600_000 } });
  tokens.set(sessionId, claimSession.lease.token);
  return claimSession.lease.token;
}

const countersOf = async (id: string) => (await client.query(DashboardSessionDocument, { id, withInputs: true })).session;

logSpec('typed client (@forkline/client, a runner pool)', {
  setup: async () => {
    app = await startTestApp();
    client = createForklineClient({ url: app.url, webSocketImpl: WebSocket, retryForMs: 0 });
  },
  teardown: async () => {
    await client.close();
    await app.close();
  },
  writesSynthetic: false, // RunnerEventInput has no synthetic flag
  createSession: async () => (await client.mutate(CreateSessionDocument, { input: { runner: POOL } })).createSession.id,
  append: async (id, events, opts) =>
    appendInRuns(events, opts?.expectedEventCount ?? (await countersOf(id))!.eventCount, {
      inputs: (run, expectedEventCount) =>
        app.services.store.append(id, run, { scope, expectedEventCount }).then(
          () => undefined,
          (err) => {
            if (!(err instanceof ForklineError)) throw err;
            return refusalOf([{ extensions: { code: err.code, ...err.details } }]);
          },
        ),
      runner: async (run, expectedEventCount) =>
        refused(
          client.mutate(AppendStepDocument, {
            input: { sessionId: id, leaseToken: await leaseOf(id), expectedEventCount, events: run.map(({ type, data }) => ({ type, data })) },
          }),
        ),
    }),
  async page(id, afterSeq, first) {
    const { session } = await client.query(SessionEventsDocument, { id, afterSeq: afterSeq < 0 ? null : afterSeq, first });
    return session!.events.edges.map((e) => e.node);
  },
  async counters(id) {
    const session = await countersOf(id);
    return (
      session && { eventCount: session.eventCount, turnCount: session.turnCount, pendingInputCount: session.pendingInputs!.length, status: session.status }
    );
  },
  fork: async (id, atSeq) => (await client.mutate(ForkSessionDocument, { input: { sessionId: id, atSeq } })).forkSession.session.id,
  async deleteSession(id, withDescendants) {
    try {
      return [...(await client.mutate(DeleteSessionDocument, { id, withDescendants: withDescendants ?? null })).deleteSession.deletedSessionIds];
    } catch (err) {
      if (!(err instanceof ForklineClientError)) throw err;
      return refusalOf(err.errors);
    }
  },
});
