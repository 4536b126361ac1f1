// searchSessions over real HTTP: full-text search over user inputs,
// model messages and titles, title matches first, each newest first, with
// snippets and the matching seq; tenant-scoped; an inherited event matches
// once, at the session that wrote it, with the descendants sharing it counted;
// keyset pages, across the window a page reads in order and the text index
// beyond it; bad input is BAD_USER_INPUT; rows found however they were written.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { EVENT_WINDOW } from '../../src/store/session-search.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { recordingHeader, recordingLine } from '../../src/core/recording.ts';

let app: TestApp;

async function as(who: Record<string, string>, query: string, variables?: Record<string, unknown>) {
  const r = await app.gql(query, variables, who);
  if (r.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(r.errors)}`);
  return r.data;
}
const codes = (r: { errors?: Array<{ extensions?: Record<string, unknown> }> }) => r.errors?.map((e) => e.extensions?.code);

const SEARCH = `query($q: String!, $first: Int, $after: String) {
  searchSessions(query: $q, first: $first, after: $after) {
    edges { cursor node { kind seq snippet rank descendants session { id title } event { seq type inherited } } }
    pageInfo { hasNextPage hasPreviousPage endCursor }
  }
}`;
async function search(who: Record<string, string>, q: string, vars: { first?: number; after?: string } = {}) {
  return (await as(who, SEARCH, { q, ...vars })).searchSessions;
}
const hits = async (who: Record<string, string>, q: string) => (await search(who, q, { first: 50 })).edges.map((e: any) => e.node);

async function createSession(who: Record<string, string>, title: string): Promise<string> {
  return (await as(who, 'mutation($t: String) { createSession(input: { title: $t }) { id } }', { t: title })).createSession.id;
}

const turns = new Map<string, number>();
/** Appends one completed turn (input, then the model's answer); returns the seqs of the inbox/add and the model/message. */
async function turn(sessionId: string, input: string, answer: string) {
  const n = (turns.get(sessionId) ?? 0) + 1;
  turns.set(sessionId, n);
  const events = textTurn(n, input, answer);
  const written = await app.services.store.append(sessionId, events);
  return { inputSeq: written[0].seq, messageSeq: written[4].seq, endSeq: written[6].seq };
}

async function fork(who: Record<string, string>, sessionId: string, atSeq: number, title?: string): Promise<string> {
  const r = await as(who, 'mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId, atSeq, title } });
  return r.forkSession.session.id;
}

beforeAll(async () => {
  app = await startTwoTenantApp();
});
afterAll(() => app?.close());

describe('searchSessions', () => {
  let ops: string;
  let opsTurn: Awaited<ReturnType<typeof turn>>;

  beforeAll(async () => {
    ops = await createSession(A, 'Release checklist');
    opsTurn = await turn(
      ops,
      'How do we roll out the kubernetes canary without downtime?',
      'Shift traffic gradually: the blue green strategy keeps the old pods serving until the new ones pass their probes.',
    );
  });

  it('finds a phrase in a model message, with its seq and a highlighted snippet', async () => {
    const found = await hits(A, '"blue green strategy"');
    expect(found).toHaveLength(1);
    const [h] = found;
    expect(h).toMatchObject({ kind: 'MESSAGE', seq: opsTurn.messageSeq, descendants: 0, session: { id: ops, title: 'Release checklist' } });
    expect(h.event).toEqual({ seq: opsTurn.messageSeq, type: 'model/message', inherited: false });
    expect(h.snippet).toContain('⟦blue⟧ ⟦green⟧ ⟦strategy⟧');
    expect(h.snippet.replace(/[⟦⟧]/g, '')).toContain('the blue green strategy keeps the old pods');
    expect(h.rank).toBeGreaterThan(0);
  });

  it('finds a word in a user input (English stemming: "canaries" matches "canary")', async () => {
    const found = await hits(A, 'kubernetes canaries');
    expect(found).toHaveLength(1);
    expect(found[0]).toMatchObject({ kind: 'INPUT', seq: opsTurn.inputSeq, session: { id: ops } });
    expect(found[0].event.type).toBe('inbox/add');
    expect(found[0].snippet).toContain('⟦kubernetes⟧ ⟦canary⟧');
  });

  it('lists title matches first, newest session first, then inputs and messages newest first', async () => {
    const older = await createSession(A, 'Observatory budget');
    const titled = await createSession(A, 'Observatory budget review');
    const chatty = await createSession(A, 'Untitled chat');
    const t1 = await turn(chatty, 'observatory budget, first', 'The observatory budget, once.');
    const t2 = await turn(chatty, 'observatory budget observatory budget', 'The observatory budget: observatory budget, again the observatory budget.');
    const found = await hits(A, 'observatory budget');
    // A turn's events are written together: the later seq first.
    expect(found.map((h: any) => [h.kind, h.session.id, h.seq])).toEqual([
      ['TITLE', titled, 0],
      ['TITLE', older, 0],
      ['MESSAGE', chatty, t2.messageSeq],
      ['INPUT', chatty, t2.inputSeq],
      ['MESSAGE', chatty, t1.messageSeq],
      ['INPUT', chatty, t1.inputSeq],
    ]);
    expect(found[0]).toMatchObject({ snippet: '⟦Observatory⟧ ⟦budget⟧ review', event: null });
    // Rank is reported (how well each matches), not used for the order.
    expect(found[2].rank).toBeGreaterThan(found[4].rank);
  });

  it('a retitled session matches its current title, at the seq of the title event that set it', async () => {
    const id = await createSession(A, 'Provisional name');
    await turn(id, 'hello', 'hi');
    const r = await as(A, 'mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "Marmalade recipes") { eventCount } }', { id });
    const found = await hits(A, 'marmalade');
    expect(found).toEqual([expect.objectContaining({ kind: 'TITLE', seq: r.setSessionTitle.eventCount - 1, session: { id, title: 'Marmalade recipes' } })]);
    expect(await hits(A, 'provisional')).toEqual([]);
  });

  it("is tenant-scoped: another tenant's sessions never match, even with the same words", async () => {
    const theirs = await createSession(B, 'Release checklist');
    await turn(theirs, 'Our own kubernetes question', 'Also the blue green strategy, for tenant B.');
    const mine = await hits(A, '"blue green strategy"');
    expect(mine.map((h: any) => h.session.id)).toEqual([ops]);
    const other = await hits(B, '"blue green strategy"');
    expect(other.map((h: any) => h.session.id)).toEqual([theirs]);
    expect((await hits(B, 'release checklist')).map((h: any) => [h.kind, h.session.id])).toEqual([['TITLE', theirs]]);
    // A phrase only tenant A wrote does not exist for B.
    expect(await hits(B, 'observatory')).toEqual([]);
  });

  it('an inherited event matches once, at the session that wrote it, counting the forks that share it', async () => {
    const root = await createSession(A, 'Zebra research');
    const first = await turn(root, 'Tell me about the zebra crossing', 'A zebra crossing is a striped pedestrian crossing.');
    const second = await turn(root, 'And a pelican crossing?', 'A pelican crossing has signals.');
    // child: shares turn 1 and turn 2; grandchild (of the child, inside turn 1's answer): shares turn 1 only
    // through the root's rows; early: forked mid-turn before the answer, so it shares the input but not the answer.
    const child = await fork(A, root, second.endSeq);
    const grandchild = await fork(A, child, first.endSeq, 'Zebra follow-up');
    const early = await fork(A, root, first.inputSeq + 2); // at turn 1's turn/start: the input was taken, no answer yet
    turns.set(child, 2); // turns are numbered per lineage
    const own = await turn(child, 'What about zebra stripes?', 'Zebra stripes deter flies.');

    const found = await hits(A, 'zebra');
    const at = (id: string, seq: number) => found.filter((h: any) => h.session.id === id && h.seq === seq);
    // The root's title: its children kept it (they share it); the grandchild has its own.
    expect(found.filter((h: any) => h.kind === 'TITLE').map((h: any) => [h.session.id, h.descendants])).toEqual(
      expect.arrayContaining([
        [root, 2],
        [grandchild, 0],
      ]),
    );
    expect(found.filter((h: any) => h.kind === 'TITLE')).toHaveLength(2);
    expect(found.slice(0, 2).every((h: any) => h.kind === 'TITLE')).toBe(true);
    // Turn 1: once, at the root; the input is shared by child, grandchild and early, the answer by child and grandchild.
    expect(at(root, first.inputSeq)).toEqual([expect.objectContaining({ kind: 'INPUT', descendants: 3 })]);
    expect(at(root, first.messageSeq)).toEqual([expect.objectContaining({ kind: 'MESSAGE', descendants: 2 })]);
    // The child's own turn matches at the child, shared by nobody.
    expect(at(child, own.inputSeq)).toEqual([expect.objectContaining({ kind: 'INPUT', descendants: 0 })]);
    expect(at(child, own.messageSeq)).toEqual([expect.objectContaining({ kind: 'MESSAGE', descendants: 0 })]);
    // Nothing is reported through a session that only inherited it.
    expect(found.filter((h: any) => h.kind !== 'TITLE' && [grandchild, early].includes(h.session.id))).toEqual([]);
    expect(found.filter((h: any) => h.kind !== 'TITLE')).toHaveLength(4);
    // Turn 2's answer is shared by the child alone.
    expect((await hits(A, 'pelican signals')).map((h: any) => [h.session.id, h.seq, h.descendants])).toEqual([[root, second.messageSeq, 1]]);
  });

  it('pages with keyset cursors: every hit once, newest first, across pages', async () => {
    const id = await createSession(A, 'Pages');
    for (let i = 1; i <= 12; i++) await turn(id, `quokka question ${i}`, `quokka ${'quokka '.repeat(i % 4)}answer ${i}`);
    const all = await hits(A, 'quokka');
    expect(all).toHaveLength(24);
    const seen: any[] = [];
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const page = await search(A, 'quokka', { first: 5, after });
      pages++;
      expect(page.pageInfo.hasPreviousPage).toBe(after !== undefined);
      seen.push(...page.edges.map((e: any) => e.node));
      if (!page.pageInfo.hasNextPage) break;
      expect(page.edges).toHaveLength(5);
      after = page.pageInfo.endCursor;
    }
    expect(pages).toBe(5);
    expect(seen.map((h) => `${h.session.id}@${h.seq}`)).toEqual(all.map((h: any) => `${h.session.id}@${h.seq}`));
    expect(new Set(seen.map((h) => h.seq)).size).toBe(24);
    // One session, newest first: its seqs descending.
    for (let i = 1; i < seen.length; i++) expect(seen[i].seq).toBeLessThan(seen[i - 1].seq);
    // The default page and the largest one.
    expect((await search(A, 'quokka')).edges).toHaveLength(20);
    expect((await search(A, 'quokka', { first: 0 })).edges).toEqual([]);
  });

  it('finds what lies beyond the window a page reads in order, and pages across it', async () => {
    const old = await createSession(A, 'Marsupials');
    const wombat = await turn(old, 'Where do wombats live?', 'Wombats dig burrows; a numbat eats termites.');
    // More searchable events than a page reads in order, each batch a turn of its own; every 100th answer names the numbat.
    const bulk = await createSession(A, 'Bulk');
    const numbats: number[] = [];
    const turnCount = EVENT_WINDOW / 2 + 50;
    for (let from = 1; from <= turnCount; from += 100) {
      const events: NewEvent[] = [];
      for (let n = from; n < from + 100 && n <= turnCount; n++) {
        events.push(...textTurn(n, `question ${n}`, n % 100 === 0 ? `answer ${n}: a numbat` : `answer ${n}`));
      }
      const written = await app.services.store.append(bulk, events);
      numbats.push(...written.filter((e) => e.type === 'model/message' && /numbat/.test(JSON.stringify(e.data))).map((e) => e.seq));
    }
    // A rare word older than the window: from the text index.
    expect((await hits(A, 'wombats')).map((h: any) => [h.session.id, h.seq])).toEqual([
      [old, wombat.messageSeq],
      [old, wombat.inputSeq],
    ]);
    // A word within the window and beyond it, in pages of 3: every hit once, newest first.
    const seen: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await search(A, 'numbat', { first: 3, after });
      seen.push(...page.edges.map((e: any) => `${e.node.session.id}@${e.node.seq}`));
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    expect(seen).toEqual([...numbats.reverse().map((seq) => `${bulk}@${seq}`), `${old}@${wombat.messageSeq}`]);
  });

  it('a query of stop words only has no hits', async () => {
    expect(await hits(A, 'the and of')).toEqual([]);
  });

  it('rejects an empty or over-long query, a bad page size or cursor with BAD_USER_INPUT', async () => {
    const bad: Array<[string, Record<string, unknown>]> = [
      [SEARCH, { q: '' }],
      [SEARCH, { q: '   ' }],
      [SEARCH, { q: 'x'.repeat(501) }],
      [SEARCH, { q: 'zebra', first: 51 }],
      [SEARCH, { q: 'zebra', first: -1 }],
      [SEARCH, { q: 'zebra', after: 'not-a-cursor' }],
      [SEARCH, { q: 'zebra', after: Buffer.from('[1,"x","ses_a",1]').toString('base64url') }],
    ];
    for (const [query, variables] of bad) {
      const r = await app.gql(query, variables, A);
      expect(codes(r), JSON.stringify(variables).slice(0, 80)).toEqual(['BAD_USER_INPUT']);
    }
    const r = await app.gql(SEARCH, { q: '' }, A);
    expect(r.errors![0].message).toMatch(/query: must not be empty/);
  });

  it('needs a token like every other query', async () => {
    const r = await app.gql(SEARCH, { q: 'zebra' });
    expect(r.status).toBe(401);
    expect(codes(r)).toEqual(['UNAUTHENTICATED']);
  });
  it('finds inputs and answers however they were written (appended, forked, imported): each row carries its session’s tenant', async () => {
    // Search walks a tenant's own rows (Event.tenant): a path that wrote them without it would hide them.
    const root = await createSession(A, 'Quagga root');
    await turn(root, 'a quagga question', 'a quagga answer');
    const child = (
      await as(A, 'mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: root, message: 'a quagga follow-up' } })
    ).forkSession.session.id;
    const recording = [
      JSON.stringify(recordingHeader({ id: 'ses_quaggarecording', title: 'Imported' })),
      ...textTurn(1, 'an imported quagga question', 'an imported quagga answer').map((e, seq) => recordingLine({ ...e, seq })),
    ].join('\n');
    const copy = (await as(A, 'mutation($r: String!) { importRecording(recording: $r) { id } }', { r: `${recording}\n` })).importRecording.id;
    const other = await createSession(B, 'Other');
    await turn(other, 'a beta quagga', 'another beta quagga');

    const { rows } = await app.db.pool.query<{ sessionId: string; tenant: string | null; owner: string }>(
      `SELECT e."sessionId", e.tenant, s.tenant AS owner FROM "Event" e JOIN "Session" s ON s.id = e."sessionId"
        WHERE e.type IN ('inbox/add', 'model/message') AND e."sessionId" = ANY($1)`,
      [[root, child, copy, other]],
    );
    expect(new Set(rows.map((r) => r.sessionId))).toEqual(new Set([root, child, copy, other]));
    for (const r of rows) expect(r.tenant, r.sessionId).toBe(r.owner);

    const found = async (who: Record<string, string>) => (await hits(who, 'quagga')).map((h: any) => `${h.session.id} ${h.kind}`);
    // The child's queued message may have been answered by now (an answer appended to the child).
    const alphas = await found(A);
    expect(alphas).toEqual(expect.arrayContaining([`${root} INPUT`, `${root} MESSAGE`, `${child} INPUT`, `${copy} INPUT`, `${copy} MESSAGE`]));
    expect(new Set(alphas.map((h: string) => h.split(' ')[0]))).toEqual(new Set([root, child, copy]));
    expect((await found(B)).sort()).toEqual([`${other} INPUT`, `${other} MESSAGE`].sort());
  });
});
