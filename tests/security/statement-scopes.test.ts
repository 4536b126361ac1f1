// A client that leaves takes its database work with it, at every read a
// request makes (docs/operations.md "Database time"): a session's row
// (session(id), the batch loader), its children and fork points, its turns
// (turns, lastTurn, turnAt, with their steps; lastAnswer), the texts read
// within the request's budget (an answer's, a waiting input's), its
// instructions, tools, workspace, open calls awaiting approval, totals and
// next model request, its files, its recording, a deletion's progress, an
// event by id (node), a search hit's event, a subscription's own reads, and
// the HTTP doors that are not GraphQL operations (GET /sessions/<id>/events,
// GET /recordings, POST /agui, POST /chat). Each test makes one of those reads
// wait on a lock the test holds (a real statement, not a sleep; the reads
// before it in the same request let through), sees it waiting in
// pg_stat_activity, hangs up, and checks that the backend's statement was
// cancelled well before the 60 s bound every statement has anyway, and that
// the pool has its connection back while the lock is still held. The app runs
// the service's default bounds (FORKLINE_STATEMENT_BOUNDS unset, 60 s): only
// the client's leaving can end these statements in time.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, securityOptions } from '../../src/config.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { importLog, importSession, locker } from '../helpers/locked-reads.ts';
import { waitFor } from '../helpers/wait.ts';

/** Far below the 60 s bound: only a cancel ends the statement this soon (the sweep runs every 100 ms; slack for a loaded machine). */
const CANCELLED_WITHIN_MS = 10_000;

describe('the reads of a client that went away', () => {
  let app: TestApp;
  let base: string;
  let root: string;
  /** A session whose turn waits for a decision on a call, with an input queued behind it. */
  let waiting: string;
  let hold: Awaited<ReturnType<typeof locker>>;

  beforeAll(async () => {
    // The default config's bounds (60 s), the rest of the security options the tests' defaults.
    const { statementBounds, statementTimeouts } = securityOptions(loadConfig({}));
    app = await startTestApp({ security: { statementBounds, statementTimeouts } });
    base = app.url.replace(/\/graphql$/, '');
    root = await importSession(app, 'ses_scope_root', 2);
    // Two children forked at the end of the first turn, one of them forked again.
    const fork = `mutation($id: ID!, $seq: Int!) { forkSession(input: { sessionId: $id, atSeq: $seq }) { session { id } } }`;
    const a = (await app.ok(fork, { id: root, seq: 6 })).forkSession.session.id;
    await app.ok(fork, { id: root, seq: 6 });
    await app.ok(fork, { id: a, seq: 6 });
    waiting = await importLog(app, 'ses_scope_waiting', [
      ['inbox/add', { text: 'question 1', inputId: 'in_1' }],
      ['inbox/remove', { reason: 'taken', inputId: 'in_1' }],
      ['turn/start', { turn: 1, inputId: 'in_1' }],
      ['step/start', { step: 1, turn: 1 }],
      ['model/message', { step: 1, turn: 1, text: 'may I?', toolCalls: [{ id: 'call_1', name: 'shell', arguments: '{"command":"ls"}' }] }],
      ['tool/approval-request', { turn: 1, step: 1, callId: 'call_1' }],
      ['inbox/add', { text: 'question 2', inputId: 'in_2' }],
    ]);
    hold = await locker(app.db.url);
  });
  afterAll(async () => {
    await hold?.end();
    await app?.close();
  });

  /** Connections of the pool in use now. */
  const busy = () => app.db.pool.totalCount - app.db.pool.idleCount;

  /**
   * Sends the request, waits until its statement waits on `table`'s lock
   * (with `statement`, the one whose text holds it: those before it are let
   * through), hangs up, and checks that the statement is cancelled and its
   * connection back in the pool, the lock still held.
   */
  async function leaveWhileWaiting(
    table: string,
    path: string,
    init: { method?: string; body?: string; headers?: Record<string, string> } = {},
    statement?: string,
  ) {
    await hold.lock(`LOCK TABLE "${table}" IN ACCESS EXCLUSIVE MODE`);
    try {
      const before = busy();
      const headers = init.body
        ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(init.body)), ...init.headers }
        : init.headers;
      const req = http.request(`${base}${path}`, { method: init.method ?? 'GET', headers });
      req.on('error', () => {}); // we hang up
      req.end(init.body);
      for (let passed = 0; ; passed++) {
        await waitFor(async () => (await hold.waiting(table)) > 0, { what: `the request's statement waiting on "${table}"` });
        if (statement === undefined || (await hold.waiting(table, statement)) > 0) break;
        if (passed === 10) throw new Error(`no statement holding ${statement} waited on "${table}"`);
        await hold.letThrough();
      }
      req.destroy();
      await waitFor(async () => (await hold.waiting(table)) === 0, { timeoutMs: CANCELLED_WITHIN_MS, what: 'no statement waiting after the client left' });
      await waitFor(() => app.db.pool.waitingCount === 0 && busy() <= before, { timeoutMs: 5000, what: 'the pool has its connections back' });
    } finally {
      await hold.release();
    }
  }

  const graphql = (query: string, variables: Record<string, unknown> = {}) => ({ method: 'POST', body: JSON.stringify({ query, variables }) });

  it('session(id): its row read is cancelled', async () => {
    await leaveWhileWaiting(
      'Session',
      '/graphql',
      graphql(
        `
          query ($id: ID!) {
            session(id: $id) {
              id
              title
              eventCount
            }
          }
        `,
        { id: root },
      ),
    );
    expect((await app.ok(`query($id: ID!) { session(id: $id) { id } }`, { id: root })).session.id).toBe(root);
  });

  it('the batch loader (nodes): its rows read is cancelled', async () => {
    await leaveWhileWaiting(
      'Session',
      '/graphql',
      graphql(
        `
          query ($ids: [ID!]!) {
            nodes(ids: $ids) {
              id
              ... on Session {
                title
              }
            }
          }
        `,
        { ids: [root] },
      ),
    );
  });

  it("children, a fork point's variants and fork points of a sessions page: their tree's lookups are cancelled", async () => {
    // The page's rows come without their trees: each child list and fork point list looks its session's tree up first (SessionTree).
    app.services.store.trees.forget(
      (await app.ok(`{ sessions(first: 10) { edges { node { id } } } }`)).sessions.edges.map((e: { node: { id: string } }) => e.node.id),
    );
    await leaveWhileWaiting(
      'SessionTree',
      '/graphql',
      graphql(`
        {
          sessions(first: 10) {
            edges {
              node {
                id
                forkPoints {
                  seq
                  childCount
                }
                children(first: 5) {
                  edges {
                    node {
                      id
                    }
                  }
                }
                variants: children(forkedAtSeq: 6) {
                  edges {
                    node {
                      id
                    }
                  }
                }
              }
            }
          }
        }
      `),
    );
    const d = await app.ok(`query($id: ID!) { session(id: $id) { forkPoints { seq childCount } children { edges { node { id } } } } }`, { id: root });
    expect(d.session.forkPoints).toEqual([{ seq: 6, childCount: 2 }]);
  });

  it('GET /sessions/<id>/events: its page read is cancelled', async () => {
    await leaveWhileWaiting('Event', `/sessions/${root}/events?after=-1&first=5`);
    const res = await fetch(`${base}/sessions/${root}/events?after=-1&first=5`);
    expect(res.status).toBe(200);
  });

  it("GET /sessions/<id>/events, conditional: its session row's read is cancelled", async () => {
    const res = await fetch(`${base}/sessions/${root}/events?after=-1&first=5`);
    const etag = res.headers.get('etag')!;
    expect(etag).toBeTruthy();
    await leaveWhileWaiting('Session', `/sessions/${root}/events?after=-1&first=5`, { headers: { 'if-none-match': etag } });
    expect((await fetch(`${base}/sessions/${root}/events?after=-1&first=5`, { headers: { 'if-none-match': etag } })).status).toBe(304);
  });

  it('GET /recordings: the export’s log read is cancelled', async () => {
    await leaveWhileWaiting('Event', `/recordings?session=${root}`);
    const res = await fetch(`${base}/recordings?session=${root}`);
    expect((await res.text()).trim().split('\n').length).toBeGreaterThan(14);
  });

  it("POST /agui: the run's reads are cancelled", async () => {
    const input = {
      threadId: root,
      runId: 'run-gone',
      messages: [{ id: 'm-gone', role: 'user', content: 'never sent' }],
      tools: [],
      context: [],
      state: {},
      forwardedProps: {},
    };
    await leaveWhileWaiting('Event', '/agui', { method: 'POST', body: JSON.stringify(input), headers: { accept: 'text/event-stream' } });
  });

  it("POST /chat: the answer's reads are cancelled", async () => {
    const body = { id: root, messages: [{ id: 'u-gone', role: 'user', parts: [{ type: 'text', text: 'never sent' }] }], trigger: 'submit-message' };
    await leaveWhileWaiting('Event', '/chat', { method: 'POST', body: JSON.stringify(body) });
  });
  /** A query of `fields` on the root session, as leaveWhileWaiting sends it. */
  const onRoot = (fields: string) => graphql(`query ($id: ID!) { session(id: $id) { id ${fields} } }`, { id: root });

  it("Session.turns: the turns' reads are cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('turns { turn input steps { step toolCallCount } }'));
    await leaveWhileWaiting('Event', '/graphql', onRoot('turns(last: 1) { turn usage { inputTokens } }'));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { turns { turn input steps { step } } } }`, { id: root });
    expect(d.session.turns.map((t: { turn: number; input: string }) => [t.turn, t.input])).toEqual([
      [1, 'question 1'],
      [2, 'question 2'],
    ]);
  });

  it('Session.lastTurn, turnAt and lastAnswer: their log reads are cancelled', async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('lastTurn { turn reason steps { step toolCallCount } }'));
    await leaveWhileWaiting('Event', '/graphql', onRoot('turnAt(seq: 3) { turn errorSeq }'));
    await leaveWhileWaiting('Event', '/graphql', onRoot('lastAnswer { seq }'));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { lastTurn { turn } turnAt(seq: 3) { turn } } }`, { id: root });
    expect([d.session.lastTurn.turn, d.session.turnAt.turn]).toEqual([2, 1]);
  });

  it('Session.files, file and fileChanges: their workspace reads are cancelled', async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('files { path size }'));
    await leaveWhileWaiting('Event', '/graphql', onRoot('file(path: "notes.txt") { text base64 }'));
    await leaveWhileWaiting('Event', '/graphql', onRoot('fileChanges(fromSeq: -1) { path diff }'));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { files { path } file(path: "notes.txt") { text } } }`, { id: root });
    expect(d.session).toEqual({ files: [], file: null });
  });

  it('Session.recording: the export’s log read is cancelled', async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('recording'));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: root });
    expect(d.session.recording.trim().split('\n').length).toBeGreaterThan(14);
  });

  it("node(id) of an Event: the event's read is cancelled", async () => {
    const page = await app.ok(`query($id: ID!) { session(id: $id) { events(first: 1) { edges { node { id } } } } }`, { id: root });
    const eventId: string = page.session.events.edges[0].node.id;
    const query = `query ($id: ID!) { node(id: $id) { id ... on Event { seq type } } }`;
    await leaveWhileWaiting('Event', '/graphql', graphql(query, { id: eventId }));
    expect((await app.ok(query, { id: eventId })).node).toMatchObject({ id: eventId, seq: 0, type: 'inbox/add' });
  });

  /** A query of `fields` on the waiting session. */
  const onWaiting = (fields: string) => graphql(`query ($id: ID!) { session(id: $id) { id ${fields} } }`, { id: waiting });
  /** The statement that reads a text within the request's budget (SessionLog.textWithin). */
  const TEXT_READ = 'left(data->>';
  /** The statement that reads an event by its seq (SessionLog.event). */
  const EVENT_READ = 'seq BETWEEN $2 AND $3';

  it("Answer.text: the answer's text read is cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('lastAnswer { seq text }'), TEXT_READ);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { lastAnswer { text } } }`, { id: root })).session.lastAnswer).toEqual({ text: 'answer 2' });
  });

  it("PendingInput.text: the waiting input's text read is cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onWaiting('pendingInputs { inputId text }'), TEXT_READ);
    const d = await app.ok(`query($id: ID!) { session(id: $id) { pendingInputs { inputId text } } }`, { id: waiting });
    expect(d.session.pendingInputs).toEqual([{ inputId: 'in_2', text: 'question 2' }]);
  });

  it.each([['instructions'], ['tools { name }'], ['workspace { key value }']])("Session.%s: the log's read is cancelled", async (fields) => {
    await leaveWhileWaiting('Event', '/graphql', onRoot(fields));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { instructions workspace { key } } }`, { id: root });
    expect(d.session).toEqual({ instructions: null, workspace: [] });
  });

  it("Session.pendingApprovals: the open turn's read is cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onWaiting('status pendingApprovals { callId name }'));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { status pendingApprovals { callId name } } }`, { id: waiting });
    expect(d.session).toEqual({ status: 'WAITING', pendingApprovals: [{ callId: 'call_1', name: 'shell' }] });
  });

  it("Session.totals: its sums' read is cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('totals { turns steps }'));
    expect((await app.ok(`query($id: ID!) { session(id: $id) { totals { turns steps } } }`, { id: root })).session.totals).toEqual({ turns: 2, steps: 2 });
  });

  it("searchSessions: a hit's event read is cancelled", async () => {
    const query = `{ searchSessions(query: "answer", first: 2) { edges { node { seq event { seq type } } } } }`;
    await leaveWhileWaiting('Event', '/graphql', graphql(query), EVENT_READ);
    const hits = (await app.ok(query)).searchSessions.edges;
    expect(hits.length).toBeGreaterThan(0);
    expect(hits.every((e: { node: { seq: number; event: { seq: number } } }) => e.node.event.seq === e.node.seq)).toBe(true);
  });

  it("Session.search: a hit's event read is cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('search(query: "answer", first: 2) { edges { node { seq event { type } } } }'), EVENT_READ);
    const d = await app.ok(`query($id: ID!) { session(id: $id) { search(query: "answer") { edges { node { event { type } } } } } }`, { id: root });
    expect(d.session.search.edges.map((e: { node: { event: { type: string } } }) => e.node.event.type)).toEqual(['model/message', 'model/message']);
  });

  it("Session.modelRequest: the log's reads that build it are cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', onRoot('modelRequest { eventCount turn }'));
    const d = await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { eventCount turn } } }`, { id: root });
    expect(d.session.modelRequest).toEqual({ eventCount: 14, turn: null });
  });

  it("sessionDeletion: the deletion's row read is cancelled", async () => {
    const query = `query ($id: ID!) { sessionDeletion(sessionId: $id) { sessionCount } }`;
    await leaveWhileWaiting('Deletion', '/graphql', graphql(query, { id: root }));
    expect((await app.ok(query, { id: root })).sessionDeletion).toBeNull();
  });

  /** A subscription on the root session over SSE. */
  const sse = (query: string) => ({ ...graphql(query, { id: root }), headers: { accept: 'text/event-stream' } });

  it("sessionEvents: the subscription's session read is cancelled", async () => {
    await leaveWhileWaiting('Session', '/graphql', sse(`subscription ($id: ID!) { sessionEvents(sessionId: $id) { seq } }`));
  });

  it("sessionTurns(afterSeq:): the catch-up's log read is cancelled", async () => {
    await leaveWhileWaiting('Event', '/graphql', sse(`subscription ($id: ID!) { sessionTurns(sessionId: $id, afterSeq: -1) { kind } }`));
  });

  it("sessionTurns(afterSeq:) from inside a step: the open step's read is cancelled", async () => {
    // From the approval request (seq 5) on: the call it names (seq 4) is read from the open step (SessionLog.openTailFolded, by type).
    const query = `subscription ($id: ID!) { sessionTurns(sessionId: $id, afterSeq: 4) { kind } }`;
    await leaveWhileWaiting('Event', '/graphql', { ...graphql(query, { id: waiting }), headers: { accept: 'text/event-stream' } }, 'AND type = $');
  });
});
