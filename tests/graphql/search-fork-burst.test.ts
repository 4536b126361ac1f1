// A search right after a burst of forks (docs/contract.md#log: cost never
// grows with the log). fanOut writes hundreds of sessions into one tree in a
// few seconds, long before autovacuum analyses them, so the planner still
// believes every tree holds about one session. Each statement the search
// makes on "Session" is run again under EXPLAIN ANALYZE in that state: the
// rows it scans stay within its windows (the newest titles, descendants
// counted up to 100), whatever plan the stale statistics chose. The root's
// title matches too, and none of its forks kept it.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { analyzed, isSelect, statementRecorder, tableRowsRead } from '../helpers/explain.ts';
import { DESCENDANTS_COUNTED, TITLE_WINDOW } from '../../src/store/session-search.ts';

let app: TestApp;
const onSession = statementRecorder(/"Session"/);
const scope = { tenant: 'local' };
/** More than any window the search reads in list order, so a scan of the tree shows. */
const FORKS = 800;

const FAN_OUT = `mutation($input: FanOutInput!) { fanOut(input: $input) { children { id } } }`;
const SEARCH = `query($q: String!) { searchSessions(query: $q, first: 20) { edges { node { kind descendants session { id title } } } } }`;

beforeAll(async () => {
  app = await startTestApp({ onQuery: onSession.onQuery });
  // Many one-session trees, analysed: statistics in which a tree is one session.
  for (let i = 0; i < 300; i++) await app.services.store.createSession(scope, { title: `solo ${i}` });
  await app.db.pool.query('ANALYZE "Session"');
  const root = await app.services.store.createSession(scope, { title: 'the beacon root' });
  await app.services.store.append(root.id, [
    { type: 'inbox/add', data: { inputId: 'in_1', text: 'Where is the light?' } },
    { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
    { type: 'model/message', data: { turn: 1, step: 1, text: 'The beacon is lit every night.', toolCalls: [] } },
    { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  ]);
  for (let made = 0; made < FORKS; made += 16) {
    const variants = Array.from({ length: Math.min(16, FORKS - made) }, (_, i) => ({ title: `variant ${made + i}` }));
    await app.ok(FAN_OUT, { input: { sessionId: root.id, variants } });
  }
});
afterAll(() => app.close());

it('a hit shared by 800 forks made a moment ago reads no more sessions than it counts', async () => {
  let hits: any;
  const statements = await onSession.during(async () => ({ searchSessions: hits } = await app.ok(SEARCH, { q: 'beacon' })));
  expect(hits.edges.map((e: { node: { kind: string; descendants: number } }) => [e.node.kind, e.node.descendants])).toEqual([
    ['TITLE', 0],
    ['MESSAGE', DESCENDANTS_COUNTED],
  ]);
  const scans: Array<{ sql: string; scanned: number }> = [];
  for (const s of statements.filter((s) => isSelect(s.sql)))
    scans.push({ sql: s.sql.replace(/\s+/g, ' ').slice(0, 140), scanned: tableRowsRead(await analyzed(app.db.pool, s.sql, s.params), 'Session') });
  expect(scans.length).toBeGreaterThan(0);
  for (const s of scans) expect(s.scanned, `${s.sql} scanned ${s.scanned} sessions`).toBeLessThanOrEqual(Math.max(TITLE_WINDOW, DESCENDANTS_COUNTED) + 20);
});
