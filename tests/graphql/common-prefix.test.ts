// Session.commonPrefix(with:): the last seq two sessions of one tree share,
// from their lineages (store/lineage.ts commonPrefix), for the dashboard's diff.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { REFERENCE_LOG } from '../spec/reference-log.ts';

let app: TestApp;
const scope = { tenant: 'local' };
const FORK = `mutation($id: ID!, $at: Int!) { forkSession(input: {sessionId: $id, atSeq: $at}) { session { id } } }`;
const PREFIX = `query($a: ID!, $b: ID!) { session(id: $a) { id commonPrefix(with: $b) } }`;
const fork = async (id: string, at: number): Promise<string> => (await app.ok(FORK, { id, at })).forkSession.session.id;
const prefix = async (a: string, b: string): Promise<number> => (await app.ok(PREFIX, { a, b })).session.commonPrefix;

let root: string;
beforeAll(async () => {
  app = await startTestApp();
  root = (await app.services.store.createSession(scope, {})).id;
  await app.services.store.append(root, REFERENCE_LOG);
});
afterAll(() => app.close());

describe('Session.commonPrefix', () => {
  it('is the lower cut for siblings, the cut for parent and child, the shared writer for cousins; -1 across trees', async () => {
    const b = await fork(root, 9);
    const e = await fork(root, 5);
    const c = await fork(b, 4); // a grandchild of root, cut inside b's inherited range
    await app.services.host.idle();
    expect(await prefix(b, e)).toBe(5);
    expect(await prefix(e, b)).toBe(5);
    expect(await prefix(root, b)).toBe(9);
    expect(await prefix(b, root)).toBe(9);
    expect(await prefix(c, e)).toBe(4); // cousins at different depths
    expect(await prefix(root, c)).toBe(4);
    const length = (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: b })).session.eventCount;
    expect(await prefix(b, b)).toBe(length - 1);

    const other = (await app.services.store.createSession(scope, {})).id;
    await app.services.store.append(other, REFERENCE_LOG.slice(0, 3));
    expect(await prefix(root, other)).toBe(-1);
  });

  it('names a missing session as not found', async () => {
    const r = await app.gql(PREFIX, { a: root, b: 'ses_missing' });
    expect(r.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
  });
});
