// The reducer state (core/log-state.ts) at the end of each session's log, for
// checking appends against the relationship rules without a replay. It is
// loaded from the session's counters, its open turn and its inbox — reads
// bounded by the open turn and the waiting inputs, never the log — and kept
// for the sessions this process appends to, so an append usually reads
// nothing. Appends are conditional on the length the state was taken at: a
// state another writer made stale costs a reload, never a wrong check.
import { LRUCache } from 'lru-cache';
import { LogState, type OpenTail } from '../core/log-state.ts';
import { sessionNotFound } from '../core/errors.ts';
import type { Db, LogRef, SessionLog } from './session-log.ts';
import { dataOf } from '../core/core-event.ts';

const MAX_SESSIONS = 10_000;

export class TailStates {
  /** The sessions appended to most recently. */
  private readonly states: LRUCache<string, LogState>;

  constructor(
    private readonly log: SessionLog,
    max = MAX_SESSIONS,
  ) {
    this.states = new LRUCache({ max });
  }

  cached(sessionId: string): LogState | undefined {
    return this.states.get(sessionId);
  }

  /**
   * Reads the state at the end of the session's log (as `db` sees it: inside a
   * transaction, its snapshot). The same row gives the session's lineage, which
   * never changes: remembered, so the agent's first read of a log it was just
   * sent a message for needs no statement of its own for it.
   */
  async load(sessionId: string, db: Db, tenant?: string): Promise<LogState> {
    const { rows } = await db.query<{
      eventCount: number;
      pendingInputCount: number;
      id: string;
      treeId: string;
      inheritedRanges: unknown;
      inheritedEventCount: number;
    }>(
      'SELECT "eventCount", "pendingInputCount", id, "treeId", "inheritedRanges", "inheritedEventCount" FROM "Session" WHERE id = $1 AND "treeId" = $3 AND ($2::text IS NULL OR tenant = $2::text)',
      [sessionId, tenant ?? null, await this.log.treeOf(sessionId, db)],
    );
    const row = rows[0];
    if (!row) throw sessionNotFound(sessionId);
    this.log.remember(row);
    return (await this.at(sessionId, row.eventCount - 1, db, row.pendingInputCount)).state;
  }

  /**
   * The state right after `seq` (a fork's cut, or the end of the log): the open
   * turn's events, the last turn's number and the waiting inputs. Title and
   * model are not part of it. Also returns what is open there (what a fork's
   * seed closes). The open turn is folded by pages: never held whole.
   */
  async at(ref: LogRef, seq: number, db: Db, pendingInputCount?: number): Promise<{ state: LogState; open?: OpenTail }> {
    if (seq < 0) return { state: new LogState() };
    const tail = await this.log.openTurnFolded(ref, seq, db);
    // Turns are numbered 1, 2, … (docs/contract.md#log): the last one started is the count.
    const lastTurn = dataOf(tail.turnStart, 'turn/start')?.turn ?? 0;
    const waiting = pendingInputCount ?? (await this.log.pendingInputCountAt(ref, seq, db));
    const state = LogState.resume({
      nextSeq: seq + 1,
      turnCount: lastTurn,
      lastTurn,
      pending: await this.log.pendingInputs(ref, waiting, db, seq),
      openTurn: tail.openTurn,
    });
    return { state, open: tail.openTurn?.openTail() };
  }

  /**
   * A state the caller replayed to the end of the log (a runner's fold, which
   * may be the first this process holds of a session another process was
   * sent the message for): kept unless a newer one is, with title and model
   * left out as `load` leaves them. Saves the reload (2–3 statements) the
   * runner's first append would make; were it stale, that append's length
   * check fails and the state is reloaded, as with any other.
   */
  offer(sessionId: string, state: LogState): void {
    const known = this.states.peek(sessionId);
    if (known && known.nextSeq >= state.nextSeq) return;
    const copy = state.clone();
    copy.title = undefined;
    copy.model = undefined;
    this.remember(sessionId, copy);
  }

  remember(sessionId: string, state: LogState): void {
    this.states.set(sessionId, state);
  }

  forget(sessionIds: Iterable<string>): void {
    for (const id of sessionIds) this.states.delete(id);
  }
}
