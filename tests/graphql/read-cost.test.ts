// Cost never grows with the log (docs/contract.md#log). For each read a client makes on a
// 20,000-event session and on forks nested in it, every statement that touches
// the Event table is run again under EXPLAIN ANALYZE: the rows Postgres scans
// (not only those it returns: a flattened join can scan the whole table and
// still return a page) stay within the page plus a small constant, and no plan
// scans the table sequentially.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribe } from '../helpers/subscribe.ts';
import type { NewEvent } from '../../src/core/events.ts';
import { anyData } from '../helpers/event-data.ts';
import { analyzed, isSelect, planNodes, planOf, statementRecorder, tableRowsRead } from '../helpers/explain.ts';

let app: TestApp;
const onEvent = statementRecorder(/"Event"/);
const scope = { tenant: 'local' };
const LOG = 20_000;
let long: string;
let nested: string;

function turnEvents(turn: number): NewEvent[] {
  const inputId = `in_${turn}`;
  return [
    { type: 'inbox/add', data: { inputId, text: `question ${turn}` } },
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn, inputId } },
    { type: 'step/start', data: { turn, step: 1 } },
    { type: 'model/message', data: { turn, step: 1, text: `answer ${turn}`, toolCalls: [] } },
    { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn, reason: 'completed' } },
  ];
}

async function createLog(events: number): Promise<string> {
  const id = (await app.services.store.createSession(scope, { title: 'long' })).id;
  const all: NewEvent[] = [];
  for (let turn = 1; all.length < events - 1; turn++) all.push(...turnEvents(turn));
  for (let i = 0; i < events - 1; i += 5000) await app.services.store.append(id, all.slice(i, Math.min(i + 5000, events - 1)));
  return id;
}

/** Runs `fn` and returns the statements on "Event" it caused, with the rows each returned and scanned. */
async function costOf(fn: () => Promise<unknown>) {
  const out: Array<{ sql: string; returned: number; scanned: number; seqScan: boolean }> = [];
  for (const s of await onEvent.during(fn)) {
    if (!isSelect(s.sql) || /\b(INSERT|UPDATE|DELETE)\b/i.test(s.sql)) continue;
    const plan = await analyzed(app.db.pool, s.sql, s.params);
    const seqScan = planNodes(plan).some((n) => n['Relation Name'] === 'Event' && n['Node Type'] === 'Seq Scan');
    out.push({ sql: s.sql.replace(/\s+/g, ' ').slice(0, 120), returned: s.rows, scanned: tableRowsRead(plan, 'Event'), seqScan });
  }
  return out;
}

function expectBounded(cost: Awaited<ReturnType<typeof costOf>>, bound: number, what: string) {
  expect(cost.length, `${what}: no statement read events`).toBeGreaterThan(0);
  for (const c of cost) expect(c.seqScan, `${what}: sequential scan in ${c.sql}`).toBe(false);
  const scanned = cost.reduce((n, c) => n + c.scanned, 0);
  const returned = cost.reduce((n, c) => n + c.returned, 0);
  expect(returned, `${what}: rows returned ${JSON.stringify(cost)}`).toBeLessThanOrEqual(bound);
  expect(scanned, `${what}: rows scanned ${JSON.stringify(cost)}`).toBeLessThanOrEqual(bound);
}

beforeAll(async () => {
  app = await startTestApp({ onQuery: onEvent.onQuery });
  long = await createLog(LOG);
  await createLog(LOG); // a second long session: the table is big enough for a bad plan to prefer a scan
  // Three nested forks, each cut inside its parent's own events, each with 1,000 events of its own.
  nested = long;
  for (let depth = 0; depth < 3; depth++) {
    const { session } = await app.services.store.fork(scope, nested, (await app.services.store.requireSession(scope, nested)).eventCount - 1);
    await app.services.store.append(
      session.id,
      Array.from({ length: 1000 }, (_, i) => ({ type: 'plugin/test/own', data: { depth, i } })),
    );
    nested = session.id;
  }
  await app.db.pool.query('ANALYZE "Event"');
});
afterAll(() => app.close());

const PAGE = `query($id: ID!, $after: Int, $first: Int) { session(id: $id) { events(afterSeq: $after, first: $first) { edges { node { id seq type data inherited } } pageInfo { hasNextPage } } } }`;

describe('reads on a 20,000-event log cost what their page costs', () => {
  it.each([
    ['the first page', -1],
    ['a middle page', 10_000],
    ['the last page', LOG - 51],
  ])('%s of 50 events', async (_name, after) => {
    for (const id of [long, nested]) {
      const cost = await costOf(() => app.ok(PAGE, { id, after, first: 50 }));
      expectBounded(cost, 51 + 5, `${id} after ${after}`);
    }
  });

  it('a page is one range of the event key, with its values and as its prepared statement is planned', async () => {
    const statements = await onEvent.during(() => app.ok(PAGE, { id: long, after: 10_000, first: 100 }));
    expect(statements).toHaveLength(1);
    const [page] = statements;
    // With the values (a custom plan) and without them (the generic plan a prepared statement settles on).
    for (const mode of ['force_custom_plan', 'force_generic_plan']) {
      const client = await app.db.pool.connect();
      try {
        await client.query(`SET plan_cache_mode = ${mode}`);
        const types = page.params.map((v) => (typeof v === 'number' ? 'int' : 'text')).join(', ');
        await client.query(`PREPARE page_plan(${types}) AS ${page.sql}`);
        const args = page.params.map((v) => (typeof v === 'number' ? String(v) : `'${v}'`)).join(', ');
        const plan = planOf(await client.query(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE page_plan(${args})`));
        await client.query('DEALLOCATE page_plan');
        const nodes = planNodes(plan);
        const scans = nodes.filter((n) => n['Index Name']);
        // The key, bounded by every condition (the session and its tree, then the range): no other index, no row read to be filtered out.
        expect(
          scans.map((n) => n['Index Name']),
          mode,
        ).toEqual(['Event_pkey']);
        expect(scans[0]['Index Cond'], mode).toMatch(/"sessionId" = .*"treeId" = .*seq >= .*seq <= /);
        expect(nodes.filter((n) => n.Filter || n['Rows Removed by Index Recheck']).length, mode).toBe(0);
        expect(nodes[0]['Shared Hit Blocks']! + nodes[0]['Shared Read Blocks']!, mode).toBeLessThanOrEqual(20);
      } finally {
        await client.query('RESET plan_cache_mode');
        client.release();
      }
    }
  });

  it('a page across the ranges of a nested fork, and the end of the log backwards', async () => {
    const { rows } = await app.db.pool.query(`SELECT "inheritedRanges" FROM "Session" WHERE id = $1`, [nested]);
    const boundary = rows[0].inheritedRanges.at(-1).fromSeq;
    expectBounded(await costOf(() => app.ok(PAGE, { id: nested, after: boundary - 20, first: 50 })), 51 + 5, 'across ranges');
    const last = `query($id: ID!) { session(id: $id) { events(last: 50) { edges { node { seq } } } } }`;
    expectBounded(await costOf(() => app.ok(last, { id: nested })), 50 + 5, 'last 50');
  });

  it('node(id) of an inherited event, pendingInputs and a fork mid-log', async () => {
    const { session } = await app.ok(PAGE, { id: nested, after: 12_344, first: 1 });
    const id = session.events.edges[0].node.id;
    expectBounded(await costOf(() => app.ok(`query($id: ID!) { node(id: $id) { ... on Event { seq data } } }`, { id })), 3, 'node');
    await app.services.store.append(nested, [{ type: 'inbox/add', data: { inputId: 'in_waiting', text: 'waiting' } }]);
    expectBounded(
      await costOf(() => app.ok(`query($id: ID!) { session(id: $id) { pendingInputs { inputId } } }`, { id: nested })),
      2 * 17 * 4 + 5,
      'pendingInputs',
    );
    // A fork in the middle of a turn deep inside the inherited prefix: index lookups and the open tail only.
    const cost = await costOf(() =>
      app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { syntheticEvents { seq } } }`, { i: { sessionId: nested, atSeq: 12_345 } }),
    );
    expectBounded(cost, 30, 'fork');
    const branch = await costOf(() =>
      app.ok(`mutation($i: BranchSessionInput!) { branchSession(input: $i) { cutSeq } }`, { i: { sessionId: nested, anchorSeq: 5_000 } }),
    );
    expectBounded(branch, 30, 'branch');
  });

  it('a subscription from the middle catches up page by page', async () => {
    const cost = await costOf(async () => {
      const sub = subscribe('ws', app.url, `subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq } }`, {
        id: long,
        after: LOG - 301,
      });
      await sub.count(300);
      await sub.close();
    });
    expectBounded(cost, 300 + 10, 'catch-up');
  });
});

describe('the workspace on a long log costs its keys', () => {
  /** A turn whose one call is a note_write of `key`: the write stored right before its ok result. */
  const writeTurn = (turn: number, key: string): NewEvent[] => {
    const inputId = `in_w${turn}`;
    const callId = `call_w${turn}`;
    return [
      { type: 'inbox/add', data: { inputId, text: `write ${key}` } },
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn, inputId } },
      { type: 'step/start', data: { turn, step: 1 } },
      { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [{ id: callId, name: 'note_write', arguments: '{}' }] } },
      { type: 'plugin/workspace/write', data: { callId, key, value: `${key}@${turn}` } },
      { type: 'tool/result', data: { turn, step: 1, callId, resultId: `res_${callId}`, status: 'ok', content: 'wrote', name: 'note_write' } },
      { type: 'step/end', data: { turn, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn, reason: 'completed' } },
    ];
  };
  const appendTurns = async (id: string, from: number, to: number, keys: number) => {
    const all = Array.from({ length: to - from + 1 }, (_, i) => writeTurn(from + i, `k${(from + i) % keys}`)).flat();
    for (let i = 0; i < all.length; i += 5000) await app.services.store.append(id, all.slice(i, i + 5000));
  };
  /** The workspace by the rule, from the whole log: a write counts when the next event is its ok result. */
  const replayed = async (id: string) => {
    const log = await app.services.store.log.page(id, -1, 100_000);
    const ws = new Map<string, { key: string; value: string; seq: number }>();
    for (const e of log) {
      const next = log[e.seq + 1];
      if (e.type === 'plugin/workspace/write' && next?.type === 'tool/result' && anyData(next).status === 'ok' && anyData(next).callId === anyData(e).callId) {
        ws.set(anyData(e).key as string, { key: anyData(e).key as string, value: anyData(e).value as string, seq: e.seq });
      }
    }
    return [...ws.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
  };

  it('note_read (one probe per range) and Session.workspace (a skip scan per range) on 2,000 writes through nested forks', async () => {
    // 2,000 turns writing 20 keys (18,000 events); a child cut at a write (the write is out: its result is not), then 100 turns
    // of its own on 5 keys; a grandchild of that, 100 more.
    const root = (await app.services.store.createSession(scope, { title: 'workspace' })).id;
    await appendTurns(root, 1, 2000, 20);
    const cutWrite = await app.services.store.log.lastOfType(root, 'plugin/workspace/write', 9_000);
    const child = (await app.services.store.fork(scope, root, cutWrite!.seq)).session.id;
    const turnsBefore = Number(String(anyData(cutWrite!).callId).slice(6));
    await appendTurns(child, turnsBefore + 1, turnsBefore + 100, 5);
    const grandchild = (await app.services.store.fork(scope, child, (await app.services.store.requireSession(scope, child)).eventCount - 1)).session.id;
    await appendTurns(grandchild, turnsBefore + 101, turnsBefore + 200, 5);
    await app.db.pool.query('ANALYZE "Event"');

    for (const id of [root, child, grandchild]) {
      const expected = await replayed(id);
      expect(expected.length).toBe(20);
      const { session } = await app.ok(`query($id: ID!) { session(id: $id) { workspace { key value seq } } }`, { id });
      expect(session.workspace).toEqual(expected);
      const listing = await costOf(() => app.ok(`query($id: ID!) { session(id: $id) { workspace { key } } }`, { id }));
      expect(listing.length, JSON.stringify(listing)).toBe(1); // one statement, whatever the number of ranges
      expectBounded(listing, 3 * 20 * 4 + 10, `workspace of ${id}`);
      const k = expected.find((e) => e.key === 'k7')!;
      const read = await costOf(async () => expect(await app.services.store.log.workspaceEntry(id, 'k7')).toEqual(k));
      expect(read.length).toBe(1);
      expectBounded(read, 3 * 3 + 2, `note_read of ${id}`);
    }
    // The write at the child's cut is not in the child's workspace (its result is not): the key's value is the one
    // before, until the child writes it. In the root it counts from its result on.
    const { key } = cutWrite!.data as { key: string };
    const firstLive = (await app.services.store.requireSession(scope, child)).firstLiveSeq;
    expect((await app.services.store.log.workspaceEntry(child, key, firstLive - 1))!.seq).toBe(cutWrite!.seq - 20 * 9);
    expect((await app.services.store.log.workspaceEntry(root, key, cutWrite!.seq))!.seq).toBe(cutWrite!.seq - 20 * 9);
    expect((await app.services.store.log.workspaceEntry(root, key, cutWrite!.seq + 1))!.seq).toBe(cutWrite!.seq);
  });
});

describe('one way in', () => {
  it('no code outside the session log reads the Event table', () => {
    const root = path.resolve(import.meta.dirname, '../../src');
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name);
        if (entry.isDirectory()) {
          if (entry.name !== 'generated') walk(file);
          continue;
        }
        // Search is the one other reader: it queries the full-text index across
        // sessions, where a row is found at the session that wrote it, not
        // through any session's log (so inherited ranges do not apply).
        const allowed = [path.join('store', 'session-log.ts'), path.join('store', 'session-search.ts')];
        if (!file.endsWith('.ts') || allowed.some((a) => file.endsWith(a))) continue;
        const text = fs.readFileSync(file, 'utf8');
        if (/FROM\s+"Event"|JOIN\s+"Event"|prisma\.event\b|\.event\.find/.test(text)) offenders.push(path.relative(root, file));
      }
    };
    walk(root);
    expect(offenders).toEqual([]);
  });
});
