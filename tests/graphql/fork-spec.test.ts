// The fork contract rows (tests/spec/fork-spec.ts) over HTTP: forkSession for
// exact cuts, branchSession for anchors, the child read back with session(id).
import { forkSpec } from '../spec/fork-spec.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
const EVENT = 'seq type data inherited synthetic createdAt';
const SESSION = `query($id: ID!) { session(id: $id) {
  eventCount turnCount status pendingInputs { inputId } forkedAtSeq inheritedEventCount firstLiveSeq
  events(first: 500) { edges { node { ${EVENT} } } }
} }`;
const forkMutation = (field: string, input: string) =>
  `mutation($input: ${input}!) { ${field}(input: $input) { cutSeq session { id } syntheticEvents { ${EVENT} } } }`;
const FORK = forkMutation('forkSession', 'ForkSessionInput');
const BRANCH = forkMutation('branchSession', 'BranchSessionInput');

async function read(id: string) {
  const {
    session: { events, pendingInputs, ...counters },
  } = await app.ok(SESSION, { id });
  return { events: events.edges.map((e: any) => e.node), counters: { ...counters, pendingInputCount: pendingInputs.length } };
}

forkSpec('GraphQL API', {
  setup: async () => void (app = await startTestApp()),
  teardown: () => app.close(),
  async createParent(events) {
    const { id } = await app.services.store.createSession({ tenant: 'local' }, {});
    await app.services.store.append(id, events);
    return { id, events: (await read(id)).events };
  },
  async fork(parent, cut) {
    const f =
      'atSeq' in cut
        ? (await app.ok(FORK, { input: { sessionId: parent.id, atSeq: cut.atSeq } })).forkSession
        : (await app.ok(BRANCH, { input: { sessionId: parent.id, ...cut } })).branchSession;
    // Input queued in the prefix (e.g. cuts 2 and 13..21) is the child's: its agent
    // answers it. Read the log and its counters once every agent is done, so both
    // describe the same log and the spec compares them exactly.
    await app.services.host.idle();
    return { id: f.session.id, ...(await read(f.session.id)), cutSeq: f.cutSeq, syntheticEvents: f.syntheticEvents };
  },
});
