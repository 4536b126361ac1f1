// The reads a log spec makes through GraphQL (tests/spec/log-spec.ts): an
// events page, the session's counters, a delete. Shared by the spec runs that
// write through the API and through the runner protocol.
import type { TestApp } from './app.ts';
import { refusalOf } from './runner-batches.ts';

export function graphqlLogReads(app: () => TestApp) {
  return {
    async page(id: string, afterSeq: number, first: number) {
      const { session } = await app().ok(
        'query($id: ID!, $after: Int, $first: Int) { session(id: $id) { events(afterSeq: $after, first: $first) { edges { node { seq type data inherited synthetic } } } } }',
        { id, after: afterSeq < 0 ? null : afterSeq, first },
      );
      return session.events.edges.map((e: any) => e.node);
    },
    async counters(id: string) {
      const { session } = await app().ok('query($id: ID!) { session(id: $id) { eventCount turnCount status pendingInputs { inputId } } }', { id });
      return (
        session && { eventCount: session.eventCount, turnCount: session.turnCount, pendingInputCount: session.pendingInputs.length, status: session.status }
      );
    },
    async deleteSession(id: string, withDescendants?: boolean) {
      const r = await app().gql('mutation($id: ID!, $all: Boolean) { deleteSession(id: $id, withDescendants: $all) { deletedSessionIds } }', {
        id,
        all: withDescendants ?? null,
      });
      return r.errors?.length ? refusalOf(r.errors) : r.data.deleteSession.deletedSessionIds;
    },
  };
}
