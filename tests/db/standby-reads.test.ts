// Reads from a real streaming hot standby (DATABASE_READ_URL) of an embedded
// Postgres of the test's own: event pages and subscription catch-up are served there
// when it has them, never older than what the client wrote or was told of,
// and a standby that lags, stops or restarts costs primary reads, not events.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { standbyReads, startPrimary, startStandby, type Primary, type Standby } from '../helpers/standby.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribe } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';

let primary: Primary;
let standby: Standby;
let app: TestApp;
let onStandby: pg.Pool; // the test's own connection to the standby (pause and resume replay)
const scope = { tenant: 'local' };
const PAGE = `query($id: ID!, $after: Int, $first: Int) { session(id: $id) { eventCount events(afterSeq: $after, first: $first) { edges { node { seq type } } pageInfo { hasNextPage } } } }`;
const EVENTS = `subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq type } }`;

beforeAll(async () => {
  primary = await startPrimary();
  const url = await primary.database('forkline_standby_reads');
  standby = await startStandby(primary.serverUrl);
  const standbyUrl = `${standby.serverUrl}/${pgConfigFromUrl(url).database}`;
  onStandby = new pg.Pool({ ...pgConfigFromUrl(standbyUrl), max: 1 });
  onStandby.on('error', () => {}); // the standby restarts under it
  app = await startTestApp({ databaseUrl: url, readUrls: [standbyUrl] });
}, 120_000);
afterAll(async () => {
  await app?.close();
  await onStandby?.end();
  await standby?.destroy();
  await primary?.stop();
});

/** forkline_standby_reads_total of one kind of read (events, sessions, session, search) by who served, from /metrics. */
async function served(read = 'events'): Promise<Record<string, number>> {
  return standbyReads(await (await fetch(app.url.replace(/graphql$/, 'metrics'))).text(), [read]);
}
const delta = (before: Record<string, number>, after: Record<string, number>) => Object.fromEntries(Object.keys(after).map((k) => [k, after[k] - before[k]]));

/** A session of `n` events (a title, then plugin events: no rule applies to them). */
async function sessionOf(n: number): Promise<string> {
  const { id } = await app.services.store.createSession(scope, { title: 'standby' });
  for (let done = 1; done < n; done += 500) {
    await app.services.store.append(
      id,
      Array.from({ length: Math.min(500, n - done) }, (_, i) => ({ type: 'plugin/test/n', data: { i: done + i } })),
    );
  }
  return id;
}
/** Waits until the standby has replayed everything the primary wrote so far. */
const caughtUp = () =>
  waitFor(
    async () => {
      const { rows } = await app.db.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      const r = await onStandby.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [rows[0].lsn]);
      return r.rows[0].ok;
    },
    { what: 'the standby to catch up' },
  );
const seqs = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);

describe('event pages from a hot standby', () => {
  it('are served by the standby once it has replayed them', async () => {
    const id = await sessionOf(300);
    await caughtUp();
    const before = await served();
    const r = await app.ok(PAGE, { id, after: 99, first: 100 });
    expect(r.session.events.edges.map((e: any) => e.node.seq)).toEqual(seqs(100, 100));
    expect(r.session.events.pageInfo.hasNextPage).toBe(true);
    const end = await app.ok(PAGE, { id, after: 249, first: 100 });
    expect(end.session.events.edges.map((e: any) => e.node.seq)).toEqual(seqs(50, 250));
    expect(end.session.events.pageInfo.hasNextPage).toBe(false);
    expect(delta(before, await served())).toEqual({ standby: 2, primary: 0, both: 0 });
    const ready = (await (await fetch(app.url.replace(/graphql$/, 'readyz'))).json()) as { status: string; checks: Record<string, string> };
    expect(ready.status).toBe('ready');
    expect(ready.checks.standby1).toMatch(/^ok, lag \d+ bytes, [\d.?]+ s$/);
  });

  it('never older than a write: with replay paused, what was written since comes from the primary', async () => {
    const id = await sessionOf(150);
    await caughtUp();
    await onStandby.query('SELECT pg_wal_replay_pause()');
    try {
      await app.services.store.append(
        id,
        seqs(40).map((i) => ({ type: 'plugin/test/after-pause', data: { i } })),
      );
      const before = await served();
      const r = await app.ok(PAGE, { id, after: 99, first: 200 });
      const got = r.session.events.edges.map((e: any) => e.node.seq);
      expect(r.session.eventCount).toBeGreaterThanOrEqual(190);
      expect(got).toEqual(seqs(r.session.eventCount - 100, 100)); // every event through the end, none missing or twice
      expect(r.session.events.edges.slice(-40).map((e: any) => e.node.type)).toEqual(Array(40).fill('plugin/test/after-pause'));
      expect(delta(before, await served())).toEqual({ standby: 0, primary: 0, both: 1 }); // 100..149 from the standby, the rest from the primary
      // A new session the standby has not seen at all: from the primary.
      const fresh = await sessionOf(5);
      const before2 = await served();
      expect((await app.ok(PAGE, { id: fresh, after: -1, first: 10 })).session.events.edges.map((e: any) => e.node.seq)).toEqual(seqs(5));
      expect(delta(before2, await served())).toEqual({ standby: 0, primary: 1, both: 0 });
    } finally {
      await onStandby.query('SELECT pg_wal_replay_resume()');
    }
  });

  it('subscription catch-up: full pages from the standby, the rest from the primary, then live; each event once, in order', async () => {
    const id = await sessionOf(700);
    await caughtUp();
    await onStandby.query('SELECT pg_wal_replay_pause()');
    let sub;
    try {
      await app.services.store.append(
        id,
        seqs(100).map((i) => ({ type: 'plugin/test/after-pause', data: { i } })),
      );
      const before = await served();
      sub = subscribe('ws', app.url, EVENTS, { id, after: -1 });
      await sub.count(800, 30_000);
      const d = delta(before, await served());
      expect(d.standby).toBeGreaterThanOrEqual(3); // pages 0..599 (200 each) from the standby
      expect(d.both + d.primary).toBeGreaterThanOrEqual(1); // 600..799: the standby has only up to 699
    } finally {
      await onStandby.query('SELECT pg_wal_replay_resume()');
    }
    await app.services.store.append(
      id,
      seqs(10).map((i) => ({ type: 'plugin/test/live', data: { i } })),
    );
    const items = await sub.count(810);
    expect(items.map((e) => e.sessionEvents.seq)).toEqual(seqs(810));
    await sub.close();
  });

  it('across a standby restart: reads while it is down come from the primary, and from it again once it is back', async () => {
    const id = await sessionOf(450);
    await caughtUp();
    await standby.stop();
    const subs = [subscribe('ws', app.url, EVENTS, { id, after: -1 }), subscribe('sse', app.url, EVENTS, { id, after: 99 })];
    await app.services.store.append(
      id,
      seqs(50).map((i) => ({ type: 'plugin/test/while-down', data: { i } })),
    );
    expect((await app.ok(PAGE, { id, after: 399, first: 200 })).session.events.edges.map((e: any) => e.node.seq)).toEqual(seqs(100, 400));
    await waitFor(async () => ((await fetch(app.url.replace(/graphql$/, 'readyz')).then((r) => r.json())) as any).checks.standby1 === 'down', {
      what: '/readyz to show the standby down',
    });
    // Reads meant for it while it is down are counted as the primary's: the metric says where they went.
    // The subscribers' catch-up reads are events reads too: done first.
    await subs[0].count(500);
    await subs[1].count(400);
    const [events0, session0] = [await served('events'), await served('session')];
    await app.ok(PAGE, { id, after: 99, first: 100 });
    expect(delta(events0, await served('events'))).toEqual({ standby: 0, primary: 1, both: 0 });
    expect(delta(session0, await served('session'))).toEqual({ standby: 0, primary: 1, both: 0 });
    await standby.restart();
    await waitFor(() => app.standbys!.statuses()[0].up, { what: 'the standby back up' });
    await app.services.store.append(
      id,
      seqs(50).map((i) => ({ type: 'plugin/test/after-restart', data: { i } })),
    );
    expect((await subs[0].count(550)).map((e) => e.sessionEvents.seq)).toEqual(seqs(550));
    expect((await subs[1].count(450)).map((e) => e.sessionEvents.seq)).toEqual(seqs(450, 100));
    await Promise.all(subs.map((s) => s.close()));
    // A new subscriber catches up from the standby again.
    await caughtUp();
    const before = await served();
    const late = subscribe('ws', app.url, EVENTS, { id, after: -1 });
    expect((await late.count(550)).map((e) => e.sessionEvents.seq)).toEqual(seqs(550));
    expect(delta(before, await served()).standby).toBeGreaterThanOrEqual(2);
    await late.close();
  });

  it('session lists: from the standby once it has replayed all the request could have seen, else from the primary', async () => {
    const LIST = '{ sessions(first: 500) { edges { node { id title } } } }';
    const made = await app.services.store.createSession(scope, { title: 'listed' });
    await caughtUp();
    const before = await served('sessions');
    expect((await app.ok(LIST)).sessions.edges.map((e: any) => e.node.id)).toContain(made.id);
    expect(delta(before, await served('sessions'))).toEqual({ standby: 1, primary: 0, both: 0 });
    await onStandby.query('SELECT pg_wal_replay_pause()');
    try {
      const created = (await app.ok('mutation { createSession(input: { title: "after the pause" }) { id } }')).createSession.id;
      const before2 = await served('sessions');
      const listed = (await app.ok(LIST)).sessions.edges.map((e: any) => e.node.id);
      expect(listed).toContain(created);
      expect(listed).toContain(made.id);
      expect(delta(before2, await served('sessions'))).toEqual({ standby: 0, primary: 1, both: 0 });
    } finally {
      await onStandby.query('SELECT pg_wal_replay_resume()');
    }
  });
});

// A session query's row and searchSessions (docs/operations.md "Hot standbys"):
// read on a standby only once it has replayed all the primary had written when
// the request began, so never older than anything the client wrote or was
// shown before asking; the fields that read the log read it as of the row's
// eventCount, whichever server the row came from.
describe("a session query's row and searchSessions from a hot standby", () => {
  const SESSION = `query($id: ID!) { session(id: $id) { id title status eventCount turnCount pendingInputs { inputId seq text } lastAnswer { seq } } }`;
  const SEARCH = `query($q: String!) { searchSessions(query: $q, first: 10) { edges { node { kind seq session { id } } } } }`;
  /** A session run by an external pool nobody serves: what is sent to it stays pending (no agent writes meanwhile). */
  const pendingSession = async (title: string) => {
    const id = (await app.ok(`mutation($t: String!) { createSession(input: { title: $t, runner: "standby-test-pool" }) { id } }`, { t: title })).createSession
      .id as string;
    const sent = (
      await app.ok(`mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }`, { id, t: `first input of ${title}` })
    ).sendMessage;
    return { id, inputId: sent.inputId as string };
  };
  const onPrimary = (id: string) => app.services.store.getSession(scope, id);

  it('a session read is served by the standby once it has caught up, with the same answer as the primary', async () => {
    const { id, inputId } = await pendingSession('row on the standby');
    await caughtUp();
    const before = await served('session');
    const s = (await app.ok(SESSION, { id })).session;
    expect(delta(before, await served('session'))).toEqual({ standby: 1, primary: 0, both: 0 });
    const row = (await onPrimary(id))!;
    expect(s).toMatchObject({ id, title: 'row on the standby', status: row.status, eventCount: row.eventCount, turnCount: row.turnCount, lastAnswer: null });
    expect(s.pendingInputs.map((p: any) => p.inputId)).toEqual([inputId]);
    expect(row.pendingInputCount).toBe(1);
  });

  it('a write then a read in the same client sees the write, with replay paused: from the primary; from the standby again once it has replayed it', async () => {
    const { id, inputId } = await pendingSession('before the pause');
    await caughtUp();
    await onStandby.query('SELECT pg_wal_replay_pause()');
    let second: string;
    try {
      await app.ok(`mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "written while paused") { id } }`, { id });
      second = (await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "second input" }) { inputId } }`, { id })).sendMessage.inputId;
      const before = await served('session');
      const s = (await app.ok(SESSION, { id })).session;
      expect(delta(before, await served('session'))).toEqual({ standby: 0, primary: 1, both: 0 });
      expect(s.title).toBe('written while paused');
      expect(s.eventCount).toBe((await onPrimary(id))!.eventCount);
      expect(s.pendingInputs.map((p: any) => p.inputId)).toEqual([inputId, second]);
      // The standby has none of it: a read there would have been stale.
      const there = await onStandby.query<{ title: string; eventCount: number }>('SELECT title, "eventCount" FROM "Session" WHERE id = $1', [id]);
      expect(there.rows[0]).toMatchObject({ title: 'before the pause' });
      expect(there.rows[0].eventCount).toBeLessThan(s.eventCount);
    } finally {
      await onStandby.query('SELECT pg_wal_replay_resume()');
    }
    await caughtUp();
    const before = await served('session');
    const s = (await app.ok(SESSION, { id })).session;
    expect(delta(before, await served('session'))).toEqual({ standby: 1, primary: 0, both: 0 });
    expect(s.title).toBe('written while paused');
    expect(s.pendingInputs.map((p: any) => p.inputId)).toEqual([inputId, second]);
  });

  it('one snapshot: a row from the standby, the log moving on on the primary before its fields read it, every field as of the row', async () => {
    const { id, inputId } = await pendingSession('snapshot');
    const n = (await onPrimary(id))!.eventCount;
    // The test's own transaction on the primary holds the Event table: the request's
    // log reads (pendingInputs, lastAnswer: on the primary) wait for it, and it appends
    // an input and a title before it lets them go.
    const writer = await app.db.pool.connect();
    try {
      await writer.query('BEGIN');
      await writer.query('LOCK TABLE "Event" IN ACCESS EXCLUSIVE MODE');
      await caughtUp();
      const before = await served('session');
      const read = app.ok(SESSION, { id });
      await waitFor(async () => (await served('session')).standby > before.standby, { what: 'the row read on the standby' });
      await waitFor(
        async () =>
          (await app.db.pool.query(`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%"Event"%'`))
            .rowCount! > 0,
        { what: "the request's log reads to wait for the Event table" },
      );
      await app.services.store.append(
        id,
        [
          { type: 'inbox/add', data: { inputId: 'in-after-the-row', text: 'appended after the row was read' } },
          { type: 'session/title', data: { title: 'moved on' } },
        ],
        { client: writer },
      );
      await writer.query('COMMIT');
      const s = (await read).session;
      expect(delta(before, await served('session'))).toEqual({ standby: 1, primary: 0, both: 0 });
      // The primary had moved on before the fields were read; the response did not.
      expect((await onPrimary(id))!.eventCount).toBe(n + 2);
      expect(s).toMatchObject({ title: 'snapshot', eventCount: n, lastAnswer: null });
      expect(s.pendingInputs.map((p: any) => p.inputId)).toEqual([inputId]);
      expect(s.pendingInputs.every((p: any) => p.seq < s.eventCount)).toBe(true);
    } finally {
      await writer.query('ROLLBACK').catch(() => {}); // after a COMMIT: a warning, nothing undone
      writer.release();
    }
    const now = (await app.ok(SESSION, { id })).session;
    expect(now).toMatchObject({ title: 'moved on', eventCount: n + 2 });
    expect(now.pendingInputs.map((p: any) => p.inputId)).toEqual([inputId, 'in-after-the-row']);
  });

  it('searchSessions: from the standby when it has replayed all the primary had written when the search began, else from the primary', async () => {
    const { id } = await pendingSession('quokka expedition');
    await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "the quokka smiles at the wombat" }) { inputId } }`, { id });
    await caughtUp();
    const before = await served('search');
    const hits = (await app.ok(SEARCH, { q: 'quokka' })).searchSessions.edges.map((e: any) => e.node);
    expect(delta(before, await served('search'))).toEqual({ standby: 1, primary: 0, both: 0 });
    // The title, the first input (which names it) and the second.
    expect(hits.map((h: any) => [h.kind, h.session.id])).toEqual([
      ['TITLE', id],
      ['INPUT', id],
      ['INPUT', id],
    ]);
    await onStandby.query('SELECT pg_wal_replay_pause()');
    try {
      const sent = (await app.ok(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "a numbat joins the quokka" }) { event { seq } } }`, { id }))
        .sendMessage;
      const before2 = await served('search');
      const numbat = (await app.ok(SEARCH, { q: 'numbat' })).searchSessions.edges.map((e: any) => e.node);
      expect(delta(before2, await served('search'))).toEqual({ standby: 0, primary: 1, both: 0 });
      expect(numbat.map((h: any) => [h.kind, h.session.id, h.seq])).toEqual([['INPUT', id, sent.event.seq]]);
      const there = await onStandby.query(`SELECT 1 FROM "Event" WHERE "sessionId" = $1 AND seq = $2`, [id, sent.event.seq]);
      expect(there.rowCount).toBe(0); // the standby would have missed it
    } finally {
      await onStandby.query('SELECT pg_wal_replay_resume()');
    }
    await caughtUp();
    const before3 = await served('search');
    expect((await app.ok(SEARCH, { q: 'numbat' })).searchSessions.edges).toHaveLength(1);
    expect(delta(before3, await served('search'))).toEqual({ standby: 1, primary: 0, both: 0 });
  });

  it('with the standby down, session reads and searches still answer (from the primary), and come back to it once it is up', async () => {
    const { id, inputId } = await pendingSession('pangolin while down');
    await caughtUp();
    await standby.stop();
    try {
      await app.ok(`mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "pangolin written while down") { id } }`, { id });
      const before = { session: await served('session'), search: await served('search') };
      const s = (await app.ok(SESSION, { id })).session;
      expect(s.title).toBe('pangolin written while down');
      expect(s.pendingInputs.map((p: any) => p.inputId)).toEqual([inputId]);
      const hits = (await app.ok(SEARCH, { q: 'pangolin' })).searchSessions.edges.map((e: any) => e.node);
      expect(hits.map((h: any) => [h.kind, h.session.id])).toEqual([
        ['TITLE', id],
        ['INPUT', id],
      ]);
      // A read that finds it gone answers from the primary; the next ones (and the poll) know it is down until a poll answers.
      expect(delta(before.session, await served('session')).standby).toBe(0);
      expect(delta(before.search, await served('search')).standby).toBe(0);
      expect(app.standbys!.statuses()[0].up).toBe(false);
    } finally {
      await standby.restart();
    }
    await waitFor(() => app.standbys!.statuses()[0].up, { what: 'the standby back up' });
    await caughtUp();
    const before = await served('session');
    expect((await app.ok(SESSION, { id })).session.title).toBe('pangolin written while down');
    expect(delta(before, await served('session'))).toEqual({ standby: 1, primary: 0, both: 0 });
  });
});
