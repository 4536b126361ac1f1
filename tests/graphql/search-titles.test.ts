// Title search through the titles' own index (store/session-search.ts): a
// title set by a session/title event is found, the title it replaced is not,
// also when the session is older than the newest titles a page reads in
// order (its match then comes from the index); and an append that sets no
// title leaves the title's indexed row as it was (docs/benchmarks.md
// "Statements per turn": an append does not index the title again).
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { TITLE_WINDOW } from '../../src/store/session-search.ts';
import { textTurn } from '../helpers/text-turn.ts';

let app: TestApp;
const scope = { tenant: 'local' };
const SEARCH = `query($q: String!) { searchSessions(query: $q, first: 20) { edges { node { kind session { id title } } } } }`;
const titleHits = async (q: string) =>
  (await app.ok(SEARCH, { q })).searchSessions.edges
    .map((e: any) => e.node)
    .filter((n: any) => n.kind === 'TITLE')
    .map((n: any) => n.session.id);

/** The row versions (xmin) of a session's row and of its title's row. */
async function versions(id: string) {
  const { rows } = await app.db.pool.query<{ session: string; title: string | null }>(
    `SELECT s.xmin::text AS session, (SELECT t.xmin::text FROM "SessionTitle" t WHERE t."sessionId" = s.id AND t."treeId" = s."treeId") AS title
       FROM "Session" s WHERE s.id = $1`,
    [id],
  );
  return rows[0];
}

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

it('finds a title set by session/title, not the one it replaced, beyond the window read in order; appends leave the title row alone', async () => {
  const id = (await app.services.store.createSession(scope, { title: 'Quokka survey' })).id;
  expect(await titleHits('quokka')).toEqual([id]);
  await app.services.store.append(id, [{ type: 'session/title', data: { title: 'Numbat census' } }]);
  // Newer titled sessions than a page reads in list order: the older match comes from the index.
  for (let i = 0; i <= TITLE_WINDOW; i++) await app.services.store.createSession(scope, { title: `filler ${i}` });
  expect(await titleHits('numbat')).toEqual([id]);
  expect(await titleHits('quokka')).toEqual([]);

  const before = await versions(id);
  await app.services.store.append(id, textTurn(1, 'where do numbats live?', 'In woodland.'));
  const after = await versions(id);
  expect(after.session).not.toBe(before.session); // the append updated the session row…
  expect(after.title).toBe(before.title); // …and not its title's
  expect(await titleHits('numbat')).toEqual([id]);

  await app.services.store.deleteSession(scope, id);
  expect(await titleHits('numbat')).toEqual([]);
});
