// The agent keeps its fold (state + conversation) between turns and reads only
// new events. What it sends the model must still be exactly what a full replay
// of the log builds — after forks deep in shared ranges, and when another
// process ran turns in between.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { buildModelMessages } from '../../src/core/model-request.ts';
import type { StoredEvent } from '../../src/store/session-log.ts';
import { anyData } from '../helpers/event-data.ts';

let a: TestApp;
let b: TestApp;
let counting = false;
let rowsRead = 0;
/** Statements that read a session row (SELECT … FROM "Session"), while counting. */
let sessionRowReads: string[] = [];
/** Every statement, while counting. */
let statements: string[] = [];
const scope = { tenant: 'local' };

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  a = await startTestApp({
    databaseUrl,
    onQuery: (sql, rows) => {
      if (!counting) return;
      statements.push(sql);
      if (/FROM "Event"/.test(sql)) rowsRead += rows;
      if (/^\s*SELECT\b[^]*FROM "Session"/.test(sql)) sessionRowReads.push(sql);
    },
  });
  b = await startTestApp({ databaseUrl });
});
afterAll(async () => {
  await a.close();
  await b.close();
});

const send = async (app: TestApp, id: string, text: string) => {
  await app.services.controller.sendMessage(scope, id, text);
  await app.services.host.idle();
};
const log = (app: TestApp, id: string) => app.services.store.log.page(id, -1, 100_000);
/** The conversation a full replay builds for the model request of the last step in `events`. */
const replayedRequest = (events: StoredEvent[]) => {
  const lastStep = events.findLast((e) => e.type === 'step/start')!;
  return buildModelMessages(events.slice(0, lastStep.seq + 1));
};

describe('the agent fold', () => {
  it('the request after forks — mid-step, in inherited ranges of inherited ranges — equals a full replay', async () => {
    const root = (await a.services.store.createSession(scope, { title: 'fold' })).id;
    await send(a, root, 'first\n!call clock\n!call note_write {"key":"k","value":"1"}\n!then\n!call note_read {"key":"k"}');
    await send(a, root, 'second');
    const rootLog = await log(a, root);
    const midStep = rootLog.find((e) => e.type === 'tool/result')!.seq; // after the first of two calls
    const child = (await a.services.controller.forkSession(scope, root, midStep)).session.id;
    await send(a, child, 'go on');
    expect(a.models.scripted.lastRequest!.messages).toEqual(replayedRequest(await log(a, child)));
    // Cut the child inside its range from the root: the grandchild shares the root's rows directly.
    const grandchild = (await a.services.controller.forkSession(scope, child, midStep - 1)).session.id;
    await send(a, grandchild, 'and from here');
    expect(a.models.scripted.lastRequest!.messages).toEqual(replayedRequest(await log(a, grandchild)));
    await send(a, grandchild, 'once more'); // warm: the fold kept from the previous turn
    expect(a.models.scripted.lastRequest!.messages).toEqual(replayedRequest(await log(a, grandchild)));
  });

  it('a fold kept by one process catches up turns another process ran in between', async () => {
    const id = (await a.services.store.createSession(scope, { title: 'two processes' })).id;
    await send(a, id, 'turn one\n!call clock');
    await send(b, id, 'turn two, elsewhere');
    await b.services.controller.setSessionTitle(scope, id, 'renamed elsewhere');
    await a.services.controller.setSessionModel(scope, id, { provider: 'scripted', model: 'other' });
    await send(a, id, 'turn three, back here');
    const events = await log(a, id);
    expect(events.filter((e) => e.type === 'turn/start').map((e) => anyData(e).turn)).toEqual([1, 2, 3]);
    expect(a.models.scripted.lastRequest!.messages).toEqual(replayedRequest(events));
    expect(a.models.scripted.lastRequest!.model).toBe('other');
    expect(a.models.scripted.lastRequest!.messages.filter((m) => m.role === 'user').map((m) => m.content)).toEqual([
      'turn one\n!call clock',
      'turn two, elsewhere',
      'turn three, back here',
    ]);
  });

  it('a 50-turn conversation reads only new events: no turn re-reads the log', async () => {
    const id = (await a.services.store.createSession(scope, { title: 'fifty' })).id;
    await send(a, id, 'turn 0'); // the cold start reads the log once
    const perTurn: number[] = [];
    for (let turn = 1; turn <= 50; turn++) {
      rowsRead = 0;
      counting = true;
      await send(a, id, `turn ${turn}${turn % 10 === 0 ? '\n!call clock' : ''}`);
      counting = false;
      perTurn.push(rowsRead);
    }
    // Each turn reads the input it takes (the one event appended by someone else), nothing more.
    expect(Math.max(...perTurn), JSON.stringify(perTurn)).toBeLessThanOrEqual(1);
    const events = await log(a, id);
    expect(events.length).toBeGreaterThan(50 * 7);
    expect(a.models.scripted.lastRequest!.messages).toEqual(replayedRequest(events));
  });

  it("a session's first turn in a process reads no session row (nor, on one Postgres, its tree): the message is queued unread, the claim brings the rest", async () => {
    // Made by the other process: nothing about it is cached here.
    const id = (await b.services.store.createSession(scope, { title: 'first turn' })).id;
    sessionRowReads = [];
    statements = [];
    counting = true;
    await send(a, id, 'hello\n!call clock');
    counting = false;
    expect((await log(a, id)).at(-1)?.type).toBe('turn/end');
    // No session row, and on one Postgres no lookup of its tree either: the message's append finds the row by id and
    // returns its tree (with DATABASE_DISTRIBUTED, one lookup in the directory first: store/append.test.ts).
    expect(sessionRowReads, sessionRowReads.join('\n')).toEqual([]);
    expect(statements.filter((sql) => /"SessionTree"/.test(sql))).toEqual([]);
    // The log is read once (the fold's catch-up): no tail state is loaded for the message or the turn.
    const eventReads = statements.filter((sql) => /FROM "Event"/.test(sql) && !/^\s*WITH s0 AS/.test(sql));
    expect(eventReads, eventReads.join('\n')).toHaveLength(1);
    // The message's append took the lease: no claim of its own.
    expect(statements.filter((sql) => /"leaseToken" = "leaseToken" \+ 1/.test(sql) && !/^\s*WITH s0 AS/.test(sql))).toEqual([]);
  });

  it('a turn claimed for input another process queued reads the new events once: no session row, no tail', async () => {
    // b queued the input (and holds the session's tail state); a, which never touched the session, claims and runs it.
    const id = (await b.services.store.createSession(scope, { title: 'queued elsewhere' })).id;
    await b.services.store.append(id, [{ type: 'inbox/add', data: { inputId: 'in_1', text: 'hello\n!call clock' } }]);
    sessionRowReads = [];
    statements = [];
    counting = true;
    a.services.host.claimMore();
    await a.services.host.idle();
    counting = false;
    const events = await log(a, id);
    expect(events.at(-1)?.type).toBe('turn/end');
    expect(events.filter((e) => e.type === 'tool/result')).toHaveLength(1);
    // The claim brings the lineage; the fold's replay is the state appends check against.
    expect(sessionRowReads, sessionRowReads.join('\n')).toEqual([]);
    const eventReads = statements.filter((sql) => /FROM "Event"/.test(sql) && !/^\s*WITH s0 AS/.test(sql));
    expect(eventReads, eventReads.join('\n')).toHaveLength(1);
  });
});
