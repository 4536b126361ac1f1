// Long sessions for the benchmarks, written in bulk inside Postgres (a million
// events through the store would take most of a minute): completed turns of 7
// events each (inbox/add, inbox/remove, turn/start, step/start, model/message,
// step/end, turn/end) after a title, with the session's counters set to match.
// The result is an ordinary valid log; the store reads it like any other.
import type pg from 'pg';
import type { NewEvent } from '../src/core/events.ts';
import type { SessionStore } from '../src/store/session-store.ts';

export const EVENTS_PER_TURN = 7;

/**
 * A session of exactly `events` events: a title, completed turns (and a few
 * plugin fillers to make the count exact), and with `openStep` a last turn
 * left inside an open step with an unanswered call, appended through the store.
 */
export async function createLongSession(
  // The store and a pool on its database (a bench context; tests pass their app's).
  { store, db }: { store: SessionStore; db: { pool: Pick<pg.Pool, 'query'> } },
  events: number,
  opts: {
    tenant?: string;
    title?: string;
    openStep?: boolean;
    /** Appended to every model answer (a word only this session's answers hold). */ answerSuffix?: string;
  } = {},
) {
  const scope = { tenant: opts.tenant ?? 'local' };
  const tailLength = opts.openStep ? OPEN_STEP_TAIL_LENGTH : 0;
  const s = await store.createSession(scope, { title: opts.title ?? `long ${events}` }); // seq 0
  const body = events - 1 - tailLength;
  const turns = Math.floor(body / EVENTS_PER_TURN);
  // One statement for the whole log: long work, as an import is (a statement of a transaction held long: db/statement-deadlines.ts).
  await store.transaction(
    (client) =>
      client.query(
        `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount")
     SELECT $1, 1 + i, $1, t.type, t.data, false, CASE WHEN i % 7 = 0 AND i < $3 THEN 1 ELSE 0 END
       FROM generate_series(0, $2 - 1) AS i,
            LATERAL (SELECT i / 7 + 1 AS turn, i % 7 AS k) AS x,
            LATERAL (SELECT
              CASE WHEN i >= $3 THEN 'plugin/bench/filler'
                   ELSE (ARRAY['inbox/add','inbox/remove','turn/start','step/start','model/message','step/end','turn/end'])[x.k + 1] END AS type,
              CASE WHEN i >= $3 THEN jsonb_build_object('i', i)
                   WHEN x.k = 0 THEN jsonb_build_object('inputId', 'in_' || x.turn, 'text', 'question ' || x.turn || ' about something long enough to be realistic')
                   WHEN x.k = 1 THEN jsonb_build_object('inputId', 'in_' || x.turn, 'reason', 'taken')
                   WHEN x.k = 2 THEN jsonb_build_object('turn', x.turn, 'inputId', 'in_' || x.turn)
                   WHEN x.k = 3 THEN jsonb_build_object('turn', x.turn, 'step', 1)
                   WHEN x.k = 4 THEN jsonb_build_object('turn', x.turn, 'step', 1, 'text', 'Echo: question ' || x.turn || repeat(' lorem ipsum', 8) || $4, 'toolCalls', '[]'::jsonb)
                   WHEN x.k = 5 THEN jsonb_build_object('turn', x.turn, 'step', 1, 'reason', 'completed')
                   ELSE jsonb_build_object('turn', x.turn, 'reason', 'completed') END AS data) AS t`,
        [s.id, body, turns * EVENTS_PER_TURN, opts.answerSuffix ? ` ${opts.answerSuffix}` : ''],
      ),
    undefined,
    'long',
  );
  await db.pool.query(`UPDATE "Session" SET "eventCount" = $2, "turnCount" = $3 WHERE id = $1`, [s.id, 1 + body, turns]);
  if (opts.openStep) await store.append(s.id, openStepTail(turns + 1));
  await db.pool.query('ANALYZE "Event"');
  return { id: s.id, turns, eventCount: events };
}

const OPEN_STEP_TAIL_LENGTH = 5;

/** An open step with an unanswered side-effect call: forks at the end write closers. */
const openStepTail = (turn: number): NewEvent[] => [
  { type: 'inbox/add', data: { inputId: 'in_last', text: 'last' } },
  { type: 'inbox/remove', data: { inputId: 'in_last', reason: 'taken' } },
  { type: 'turn/start', data: { turn, inputId: 'in_last' } },
  { type: 'step/start', data: { turn, step: 1 } },
  { type: 'model/message', data: { turn, step: 1, text: '', toolCalls: [{ id: 'call_1', name: 'note_write', arguments: '{}' }] } },
];
