// Copy-free forks (docs/contract.md#exact-fork): children share their ancestors' rows through
// inherited ranges. Every read a client makes — pages either way, node(id),
// subscriptions, exports, counters — must see exactly the log the fork
// contract defines, at and around every range boundary, five levels deep.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribe } from '../helpers/subscribe.ts';
import { REFERENCE_LOG, openAtCut, withSeqs } from '../spec/reference-log.ts';
import { buildForkSeed } from '../../src/core/fork-seed.ts';
import { foldLog } from '../../src/core/log-state.ts';
import { recordingLine } from '../../src/core/recording.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import type { LogEvent } from '../../src/core/events.ts';

let app: TestApp;
const scope = { tenant: 'local' };

interface Expected extends LogEvent {
  inherited: boolean;
  synthetic: boolean;
}
/** What a session's log must be, built by the pure core from its parent's expected log. */
const expected = new Map<string, Expected[]>();

const ALL = `query($id: ID!, $after: Int, $first: Int) { session(id: $id) { eventCount inheritedEventCount
  events(afterSeq: $after, first: $first) { edges { cursor node { id seq type data inherited synthetic sessionId createdAt } } pageInfo { hasNextPage hasPreviousPage endCursor } } } }`;
const BACK = `query($id: ID!, $before: String, $last: Int) { session(id: $id) {
  events(before: $before, last: $last) { edges { node { seq type data inherited } } pageInfo { hasNextPage hasPreviousPage } } } }`;
const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq syntheticEvents { id seq type } session { id eventCount turnCount inheritedEventCount firstLiveSeq title pendingInputs { inputId } } } }`;

const strip = (e: any) => ({ seq: e.seq, type: e.type, data: e.data, inherited: e.inherited, synthetic: e.synthetic });
async function readAll(id: string): Promise<any[]> {
  const out: any[] = [];
  for (let after = -1; ;) {
    const { session } = await app.ok(ALL, { id, after, first: 500 });
    const page = session.events.edges.map((e: any) => e.node);
    out.push(...page);
    if (!session.events.pageInfo.hasNextPage) return out;
    after = page.at(-1).seq;
  }
}

async function fork(parent: string, atSeq: number, own: number) {
  const { forkSession: f } = await app.ok(FORK, { i: { sessionId: parent, atSeq } });
  const parentLog = expected.get(parent)!;
  const seed = buildForkSeed({ parentSessionId: parent, cutSeq: atSeq, openTail: openAtCut(parentLog, atSeq), effectOf: toolEffectOf });
  const log: Expected[] = [
    ...parentLog.slice(0, atSeq + 1).map((e) => ({ ...e, inherited: true })),
    ...seed.events.map((e) => ({ seq: e.seq, type: e.type, data: e.data, inherited: false, synthetic: e.synthetic ?? false })),
  ];
  // Its own events after the seed, so that the next level can cut inside them.
  const extra = Array.from({ length: own }, (_, i) => ({ type: 'plugin/test/own', data: { session: f.session.id, i } }));
  if (own) await app.services.store.append(f.session.id, extra);
  for (const e of extra) log.push({ seq: log.length, ...e, inherited: false, synthetic: false });
  expected.set(f.session.id, log);
  return f;
}

let root: string;
const chain: string[] = [];

beforeAll(async () => {
  app = await startTestApp();
  root = (await app.services.store.createSession(scope, {})).id;
  await app.services.store.append(root, REFERENCE_LOG);
  expected.set(
    root,
    withSeqs(REFERENCE_LOG).map((e) => ({ ...e, inherited: false, synthetic: false })),
  );
  // Depth 5, each cut chosen to land somewhere different in the lineage:
  const a = await fork(root, 25, 6); //     mid-step in the root: a = root[0..25] + own 26..
  const b = await fork(a.session.id, 30, 5); // inside a's own part: b = root[0..25] + a[26..30] + own
  const c = await fork(b.session.id, 28, 4); // inside b's range from a: c = root[0..25] + a[26..28] + own
  const d = await fork(c.session.id, 10, 9); // inside c's range from root (inherited of inherited): d = root[0..10] + own
  const e = await fork(d.session.id, 14, 3); // inside d's own part, just past its marker and closers
  chain.push(a.session.id, b.session.id, c.session.id, d.session.id, e.session.id);
});
afterAll(() => app.close());

describe('nested forks through shared storage', () => {
  it('every level reads exactly the log the fork contract defines', async () => {
    for (const id of [root, ...chain]) {
      const log = await readAll(id);
      expect(log.map(strip), id).toEqual(expected.get(id)!.map(strip));
      expect(log.every((e: any) => e.sessionId === id)).toBe(true);
    }
  });

  it('each child stores only its own rows and records ranges pointing at the rows owners', async () => {
    const { rows } = await app.db.pool.query<{ id: string; own: number; eventCount: number; inheritedEventCount: number; inheritedRanges: any[] }>(
      `SELECT s.id, s."eventCount", s."inheritedEventCount", s."inheritedRanges", (SELECT count(*)::int FROM "Event" e WHERE e."sessionId" = s.id) AS own
         FROM "Session" s WHERE s.id = ANY($1)`,
      [chain],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const id of chain) {
      const r = byId.get(id)!;
      expect(r.own, id).toBe(r.eventCount - r.inheritedEventCount);
    }
    const [a, b, c, d] = chain;
    expect(byId.get(c)!.inheritedRanges).toEqual([
      { sessionId: root, fromSeq: 0, toSeq: 25 },
      { sessionId: a, fromSeq: 26, toSeq: 28 },
    ]);
    expect(byId.get(d)!.inheritedRanges).toEqual([{ sessionId: root, fromSeq: 0, toSeq: 10 }]);
    expect(byId.get(chain[4])!.inheritedRanges).toEqual([
      { sessionId: root, fromSeq: 0, toSeq: 10 },
      { sessionId: d, fromSeq: 11, toSeq: 14 },
    ]);
    expect(byId.get(b)!.inheritedRanges).toEqual([
      { sessionId: root, fromSeq: 0, toSeq: 25 },
      { sessionId: a, fromSeq: 26, toSeq: 30 },
    ]);
    // Every session of the lineage carries the tree root.
    const trees = await app.db.pool.query(`SELECT DISTINCT "treeId" FROM "Session" WHERE id = ANY($1)`, [[root, ...chain]]);
    expect(trees.rows).toEqual([{ treeId: root }]);
  });

  it('a shared row has one id per session it is read through, and node() resolves each', async () => {
    const c = chain[2];
    const [parentEvent] = (await app.ok(ALL, { id: root, after: 4, first: 1 })).session.events.edges.map((e: any) => e.node);
    const [childEvent] = (await app.ok(ALL, { id: c, after: 4, first: 1 })).session.events.edges.map((e: any) => e.node);
    expect(strip({ ...childEvent, inherited: false })).toEqual(strip(parentEvent));
    expect(childEvent.id).not.toBe(parentEvent.id);
    expect(childEvent.inherited).toBe(true);
    expect(parentEvent.inherited).toBe(false);
    const NODE = `query($id: ID!) { node(id: $id) { __typename ... on Event { id seq sessionId inherited } } }`;
    expect((await app.ok(NODE, { id: parentEvent.id })).node).toEqual({ __typename: 'Event', id: parentEvent.id, seq: 5, sessionId: root, inherited: false });
    expect((await app.ok(NODE, { id: childEvent.id })).node).toEqual({ __typename: 'Event', id: childEvent.id, seq: 5, sessionId: c, inherited: true });
    const past = childEvent.id.replace(/_5$/, '_99999');
    expect((await app.ok(NODE, { id: past })).node).toBeNull();
    expect((await app.ok(NODE, { id: 'evt_nope' })).node).toBeNull();
  });

  it('pages at, before and after every range boundary, forwards and backwards, at page sizes 1, 2 and 500', async () => {
    for (const id of chain) {
      const log = expected.get(id)!;
      const { rows } = await app.db.pool.query(`SELECT "inheritedRanges" FROM "Session" WHERE id = $1`, [id]);
      const boundaries = [0, ...rows[0].inheritedRanges.map((r: any) => r.toSeq + 1), log.length - 1];
      for (const b of boundaries) {
        for (const after of [b - 2, b - 1, b]) {
          if (after < -1 || after >= log.length) continue;
          for (const first of [1, 2, 500]) {
            const { session } = await app.ok(ALL, { id, after, first });
            const want = log.slice(after + 1, after + 1 + first);
            expect(
              session.events.edges.map((e: any) => strip(e.node)),
              `${id} after ${after} first ${first}`,
            ).toEqual(want.map(strip));
            expect(session.events.pageInfo.hasNextPage).toBe(after + 1 + first < log.length);
            expect(session.events.pageInfo.hasPreviousPage).toBe(after >= 0);
          }
        }
        for (const last of [1, 2, 500]) {
          const before = Math.min(b + 1, log.length);
          const { session } = await app.ok(BACK, { id, before: String(before), last });
          const want = log.slice(Math.max(0, before - last), before);
          expect(
            session.events.edges.map((e: any) => e.node.seq),
            `${id} before ${before} last ${last}`,
          ).toEqual(want.map((e) => e.seq));
          expect(session.events.pageInfo.hasPreviousPage).toBe(before - last > 0);
        }
      }
    }
    // `last` alone reads the end of the log.
    const e = chain[4];
    const { session } = await app.ok(BACK, { id: e, last: 3 });
    expect(session.events.edges.map((x: any) => x.node.seq)).toEqual(
      expected
        .get(e)!
        .slice(-3)
        .map((x) => x.seq),
    );
  });

  it('subscriptions catch up across ranges from any seq, then go live', async () => {
    const e = chain[4];
    const log = expected.get(e)!;
    for (const after of [-1, 9, 10, 11, 14]) {
      const sub = subscribe(
        'ws',
        app.url,
        `subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq type data inherited } }`,
        { id: e, after },
      );
      const items = await sub.count(log.length - after - 1);
      expect(
        items.map((i: any) => i.sessionEvents),
        `after ${after}`,
      ).toEqual(log.slice(after + 1).map(({ seq, type, data, inherited }) => ({ seq, type, data, inherited })));
      await sub.close();
    }
  });

  it('exports a nested child as the whole log with inherited flags, and the export imports as an equal log', async () => {
    const c = chain[2];
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: c });
    const lines = session.recording.trimEnd().split('\n');
    expect(JSON.parse(lines[0])).toMatchObject({ format: 'forkline.recording', version: 4, session: { id: c } });
    const read = await readAll(c);
    expect(lines.slice(1)).toEqual(read.map((e: any) => recordingLine({ ...e, createdAt: e.createdAt })));
    const { importRecording: copy } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id inheritedEventCount } }`, {
      r: session.recording,
    });
    expect((await readAll(copy.id)).map(strip)).toEqual(read.map(strip));
  });

  it('a fork at any seq of a nested child gets the counters a replay of its prefix gives', async () => {
    // c's log has queued input (in_2 at seq 13, taken at 22) and two turns through its ranges.
    const c = chain[2];
    const log = expected.get(c)!;
    // The store's fork: no agent is woken, so the counters stay as the fork wrote them.
    for (let cut = 0; cut < log.length; cut++) {
      const f = await app.services.store.fork(scope, c, cut);
      const state = foldLog(log.slice(0, cut + 1));
      expect({ turns: f.session.turnCount, title: f.session.title, pending: f.session.pendingInputCount }, `cut ${cut}`).toEqual({
        turns: state.turnCount,
        title: state.title ?? null,
        pending: state.pendingInputCount,
      });
      const { session } = await app.ok(`query($id: ID!) { session(id: $id) { pendingInputs { inputId text seq } } }`, { id: f.session.id });
      expect(session.pendingInputs, `cut ${cut}`).toEqual(state.pendingInputs);
    }
  });
});
