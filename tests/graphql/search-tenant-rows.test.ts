// Search walks a tenant's own inputs and answers (Event.tenant, the session's:
// store/session-search.ts), so every path that writes them must write the
// tenant: an append, a fork's own events (its queued message), an imported
// recording. A row written without it would never be found in order.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { textTurn } from '../helpers/text-turn.ts';
import { recordingHeader, recordingLine } from '../../src/core/recording.ts';

const TOKEN_A = 'alpha-token-0123456789abcdef';
const TOKEN_B = 'beta-token-0123456789abcdef0';
const A = { authorization: `Bearer ${TOKEN_A}` };
const B = { authorization: `Bearer ${TOKEN_B}` };
const SEARCH = `query($q: String!) { searchSessions(query: $q, first: 20) { edges { node { kind seq session { id } } } } }`;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({
    security: {
      apiTokens: new Map([
        [TOKEN_A, 'alpha'],
        [TOKEN_B, 'beta'],
      ]),
      rateLimit: false,
    },
  });
});
afterAll(() => app?.close());

it('inputs and answers carry their session’s tenant however they were written: appended, forked, imported', async () => {
  const root = (await app.services.store.createSession({ tenant: 'alpha' }, { title: 'Root' })).id;
  await app.services.store.append(root, textTurn(1, 'a wombat question', 'a wombat answer'));
  const fork = await app.gql(
    `mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`,
    { i: { sessionId: root, message: 'a wombat follow-up' } },
    A,
  );
  expect(fork.errors).toBeUndefined();
  const child = fork.data!.forkSession.session.id as string;
  const recording = [
    JSON.stringify(recordingHeader({ id: 'ses_wombatrecording', title: 'Imported' })),
    ...textTurn(1, 'an imported wombat question', 'an imported wombat answer').map((e, seq) => recordingLine({ ...e, seq })),
  ].join('\n');
  const imported = await app.gql(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: `${recording}\n` }, A);
  expect(imported.errors).toBeUndefined();
  const copy = imported.data!.importRecording.id as string;
  // Beta's own wombat, which alpha must not see.
  const other = (await app.services.store.createSession({ tenant: 'beta' }, { title: 'Other' })).id;
  await app.services.store.append(other, textTurn(1, 'a beta wombat', 'another beta wombat'));

  const { rows } = await app.db.pool.query<{ sessionId: string; tenant: string | null; owner: string }>(
    `SELECT e."sessionId", e.tenant, s.tenant AS owner FROM "Event" e JOIN "Session" s ON s.id = e."sessionId" WHERE e.type IN ('inbox/add', 'model/message')`,
  );
  expect(new Set(rows.map((r) => r.sessionId))).toEqual(new Set([root, child, copy, other]));
  for (const r of rows) expect(r.tenant, r.sessionId).toBe(r.owner);

  const hits = async (headers: Record<string, string>) =>
    (
      (await app.gql(SEARCH, { q: 'wombat' }, headers)).data!.searchSessions.edges as Array<{ node: { kind: string; seq: number; session: { id: string } } }>
    ).map((e) => `${e.node.session.id} ${e.node.kind}`);
  // The child's queued message may have been answered by now (an answer appended to the child).
  const alphas = await hits(A);
  expect(alphas).toEqual(expect.arrayContaining([`${root} INPUT`, `${root} MESSAGE`, `${child} INPUT`, `${copy} INPUT`, `${copy} MESSAGE`]));
  expect(new Set(alphas.map((h) => h.split(' ')[0]))).toEqual(new Set([root, child, copy]));
  expect((await hits(B)).sort()).toEqual([`${other} INPUT`, `${other} MESSAGE`].sort());
});
