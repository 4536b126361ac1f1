// An external runner's hold on a session, as a test drives it through the real
// GraphQL door: claimSession, then appendEvents batches each conditional on the
// log's length the one before left (docs/runners.md), each call in the log
// before its result (docs/runners.md "Why the call goes first").
import type { TestApp } from './app.ts';
import { callFirstBatches } from './runner-batches.ts';

export interface ClaimedSession {
  token: number;
  /** Appends a batch under the lease, where the last one left the log: split after each model/message that makes calls. */
  append(events: Array<{ type: string; data: unknown }>): Promise<void>;
}

/** Claims `sessionId` as runner `r1`; `startTurn`: the claim writes the turn's opening (its first step open). */
export async function claimSession(app: TestApp, sessionId: string, { startTurn = false } = {}): Promise<ClaimedSession> {
  const claimed = await app.ok(
    `mutation($id: ID!, $startTurn: Boolean) { claimSession(input: {sessionId: $id, runnerId: "r1", startTurn: $startTurn}) { session { eventCount } lease { token } } }`,
    { id: sessionId, startTurn },
  );
  const token = claimed.claimSession.lease.token as number;
  let count = claimed.claimSession.session.eventCount as number;
  return {
    token,
    async append(batch) {
      for (const events of callFirstBatches(batch)) {
        const r = await app.ok(`mutation($input: AppendEventsInput!) { appendEvents(input: $input) { session { eventCount } } }`, {
          input: { sessionId, leaseToken: token, expectedEventCount: count, events },
        });
        count = r.appendEvents.session.eventCount;
      }
    },
  };
}
