// Forks: copy-free children of a session at a cut (docs/contract.md#exact-fork and
// docs/contract.md#branch), each written with its seed in one REPEATABLE READ transaction that
// records the ancestor ranges it shares (lineage.ts) instead of copying them.
import type pg from 'pg';
import { CURRENT_FORMAT_VERSION, decodeEvent, type NewEvent, type ResponseFormat } from '../core/events.ts';
import { ForklineError, badInput, sessionNotFound } from '../core/errors.ts';
import { buildForkSeed, type ForkSeed } from '../core/fork-seed.ts';
import { BEGINS_WORK_TYPES, COMPLETED_STANDALONE_TYPES, selectBranchCut } from '../core/cut.ts';
import type { ToolEffectLookup } from '../core/tools.ts';
import type { LogState } from '../core/log-state.ts';
import { dataOf } from '../core/core-event.ts';
import { eventId, newInputId, newSessionId } from './ids.ts';
import { childRanges, type Lineage } from './lineage.ts';
import type { SessionLog, StoredEvent } from './session-log.ts';
import { modelOfRow, SESSION_COLUMNS_SQL, type SessionModel, type SessionRow } from './session-rows.ts';
import type { TailStates } from './tail-states.ts';
import { checkedAppend, eventRows, lastModelIn, lastTurnFailedIn } from './append.ts';
import { SESSIONS_CHANNEL, notify } from './channels.ts';
import { isTransactionConflict, retried } from './retries.ts';
import { inTransaction, type BeforeCommit } from './transaction.ts';
import type { Scope } from './scope.ts';

export interface ForkResult {
  session: SessionRow;
  parent: SessionRow;
  cutSeq: number;
  syntheticEvents: StoredEvent[];
  /** The input the fork queued in the child (its `message`), if any. */
  inputId?: string;
}

export interface ModelConfig {
  provider: string;
  model: string;
  settings?: Record<string, unknown>;
  /** The model's context window in tokens (the budget of its requests); unset: the known window of the model, or the default. */
  contextTokens?: number;
}

/**
 * What a fork's child gets after its seed, in the fork's own transaction:
 * a title, a model, instructions, and a message queued as its input, so its
 * agent starts on it as soon as the fork commits.
 */
export interface ChildOverrides {
  title?: string | null;
  model?: ModelConfig | null;
  message?: string | null;
  /** The JSON Schema the message's answer must match (structured output; with `message` only). */
  responseFormat?: ResponseFormat | null;
  /** The child's instructions (a session/instructions event; empty text: none). Omitted: those in force at the cut. */
  instructions?: string | null;
}

/** Children of one parent at one cut (fanOut). */
export interface ForkManyResult {
  parent: SessionRow;
  cutSeq: number;
  children: Array<{ session: SessionRow; syntheticEvents: StoredEvent[]; inputId?: string }>;
}

export interface ForkManyRecord {
  parentId: string;
  cutSeq: number;
  children: Array<{ sessionId: string; inputId?: string }>;
}

/** At most this many children per fork (fanOut variants). */
export const MAX_FORK_CHILDREN = 16;

/** What identifies a fork's result (an idempotent retry loads the answer from it). */
export interface ForkRecord {
  sessionId: string;
  parentId: string;
  cutSeq: number;
  inputId?: string;
}

/**
 * An exact seq (never moves, docs/contract.md#exact-fork), a turn-level branch through the
 * turn/end at or after an anchor (docs/contract.md#branch), or right before the inbox/add of
 * an input (editMessage: an exact cut at its seq - 1).
 */
export type Cut = number | { anchorSeq?: number | null; beforeInput?: undefined } | { beforeInput: string; anchorSeq?: undefined };

/** Forks run again after a conflict with a concurrent transaction (retries.ts), from a new snapshot. */
const MAX_FORK_ATTEMPTS = 5;

export class Forks {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    private readonly tails: TailStates,
    private readonly effectOf: ToolEffectLookup,
  ) {}

  /**
   * Exact fork (docs/contract.md#exact-fork). In one REPEATABLE READ transaction — one
   * snapshot of the parent even while it is being appended to — it validates or
   * selects the cut, reads the open tail at the cut, and writes the child: its
   * row, recording the ancestor ranges it shares (store/lineage.ts), and its own
   * marker and closers (then its title, model and queued message, when given),
   * before the child is visible.
   * Nothing is copied: the cost is a few index lookups whatever the parent's length.
   * A numeric cut is exact and never moves; an anchor selects a turn-level
   * branch from the same snapshot (docs/contract.md#branch); an input cuts right before the
   * inbox/add that queued it (editMessage). Omitted: through the last turn/end.
   */
  async fork(
    scope: Scope,
    parentId: string,
    cut: Cut | undefined,
    opts: ChildOverrides & { beforeCommit?: BeforeCommit<ForkRecord> } = {},
  ): Promise<ForkResult> {
    const { beforeCommit, ...overrides } = opts;
    const r = await this.forkMany(scope, parentId, cut, [overrides], {
      beforeCommit: beforeCommit && ((client, rec) => beforeCommit(client, { ...rec.children[0], parentId: rec.parentId, cutSeq: rec.cutSeq })),
    });
    return { ...r.children[0], parent: r.parent, cutSeq: r.cutSeq };
  }

  /**
   * Several children of one parent at one cut (fanOut), in one REPEATABLE READ
   * transaction: the cut, the state at it and the seed are read once, from one
   * snapshot, and each child gets its own row, marker and closers and its own
   * overrides. All of them or none exist once it commits.
   */
  async forkMany(
    scope: Scope,
    parentId: string,
    cut: Cut | undefined,
    children: readonly ChildOverrides[],
    opts: { beforeCommit?: BeforeCommit<ForkManyRecord> } = {},
  ): Promise<ForkManyResult> {
    if (children.length < 1 || children.length > MAX_FORK_CHILDREN) throw badInput(`a fork writes 1..${MAX_FORK_CHILDREN} children, not ${children.length}`);
    // The child's parent key is checked against the parent row as of the
    // snapshot: a transaction that deleted or locked the row FOR UPDATE after
    // it makes Postgres abort the fork (serialization failure). The whole fork
    // runs again from a new snapshot, so it still reads one observation: it
    // succeeds, or finds the parent gone (SESSION_NOT_FOUND).
    const result = await retried(MAX_FORK_ATTEMPTS, isTransactionConflict, () => this.forkOnce(scope, parentId, cut, children, opts.beforeCommit)).catch(
      (err) => {
        throw isTransactionConflict(err)
          ? new ForklineError('SESSION_BUSY', `session ${parentId} kept changing while it was being forked (${MAX_FORK_ATTEMPTS} attempts); try again`, {
              sessionId: parentId,
            })
          : err;
      },
    );
    for (const c of result.made) this.tails.remember(c.session.id, c.after);
    return {
      parent: result.parent,
      cutSeq: result.cutSeq,
      children: result.made.map((c) => {
        this.log.remember(c.session);
        return { session: c.session, syntheticEvents: c.synthetic, inputId: c.inputId };
      }),
    };
  }

  /** One attempt at forkMany: its REPEATABLE READ transaction. */
  private forkOnce(scope: Scope, parentId: string, cut: Cut | undefined, children: readonly ChildOverrides[], beforeCommit?: BeforeCommit<ForkManyRecord>) {
    return inTransaction(
      this.pool,
      async (client) => {
        const treeId = await this.log.treeOf(parentId, client);
        const { rows } = await client.query<SessionRow>(`SELECT ${SESSION_COLUMNS_SQL} FROM "Session" WHERE id = $1 AND "treeId" = $3 AND tenant = $2`, [
          parentId,
          scope.tenant,
          treeId,
        ]);
        const parent = rows[0];
        if (!parent) throw sessionNotFound(parentId);
        const lineage = this.log.remember(parent);
        const cutSeq = await this.selectCut(parent, lineage, cut, client);

        // The reducer's state at the cut — indexed lookups, never a scan of the
        // prefix — gives the seed; each child's events are checked like any
        // append, and its counters are the state after them.
        const { state: atCut, open } = await this.tails.at(lineage, cutSeq, client);
        const inheritedTitle = cutSeq >= 0 ? dataOf(await this.log.lastOfType(lineage, 'session/title', cutSeq, client), 'session/title')?.title : undefined;
        // The model in force at the cut (the list shows it: Session.modelName): the parent's at its end, else one probe.
        const inheritedModel = cutSeq === parent.eventCount - 1 ? modelOfRow(parent) : await this.modelAt(lineage, cutSeq, client);
        const seed = buildForkSeed({ parentSessionId: parentId, cutSeq, openTail: open, effectOf: this.effectOf });
        // Children written together share a createdAt (the transaction's): ids in
        // ascending order keep them listed (createdAt, id) in the order given.
        const ids = children.map(() => newSessionId()).sort();
        // The children's entries in the directory of trees: their parent's tree.
        await client.query('INSERT INTO "SessionTree" (id, "treeId") SELECT unnest($1::text[]), $2', [ids, parent.treeId]);
        const made: Array<{ session: SessionRow; inputId?: string; after: LogState; synthetic: StoredEvent[] }> = [];
        for (const [i, overrides] of children.entries()) {
          made.push(await this.writeChild(client, ids[i], { parent, lineage, cutSeq, atCut, seed, inheritedTitle, inheritedModel }, overrides));
        }
        await beforeCommit?.(client, { parentId, cutSeq, children: made.map(({ session, inputId }) => ({ sessionId: session.id, inputId })) });
        return { parent, cutSeq, made };
      },
      'REPEATABLE READ',
      'long', // a fork of a long log (its tail's state at the cut) may take longer than a mutation
    );
  }

  private async modelAt(lineage: Lineage, cutSeq: number, client: pg.PoolClient): Promise<SessionModel | null> {
    const m = cutSeq >= 0 ? dataOf(await this.log.lastOfType(lineage, 'session/model', cutSeq, client), 'session/model') : undefined;
    return m ? { provider: m.provider, model: m.model } : null;
  }

  /** The cut a fork takes, from the transaction's snapshot of the parent. */
  private async selectCut(parent: SessionRow, lineage: Lineage, cut: Cut | undefined, client: pg.PoolClient): Promise<number> {
    const last = parent.eventCount - 1;
    if (typeof cut === 'number') {
      if (!Number.isSafeInteger(cut) || cut < 0 || cut > last) {
        throw new ForklineError('SEQ_OUT_OF_RANGE', `atSeq ${cut} is not an event of session ${parent.id} (valid: 0..${last})`, {
          atSeq: cut,
          eventCount: parent.eventCount,
        });
      }
      return cut;
    }
    if (cut?.beforeInput !== undefined) {
      // Right before the input's inbox/add (-1 when it is the first event: the child holds only its seed).
      const added = await this.log.inboxAddOf(lineage, cut.beforeInput, last, {}, client);
      if (!added) throw badInput(`input ${cut.beforeInput} is not an input of session ${parent.id}`, { inputId: cut.beforeInput });
      return added.seq - 1;
    }
    const seqOf = (e: StoredEvent | undefined) => e?.seq;
    return selectBranchCut(
      {
        atOrAfter: async (seq) => seqOf(await this.log.firstOfType(lineage, 'turn/end', seq, client)),
        last: async () => seqOf(await this.log.lastOfType(lineage, 'turn/end', last, client)),
        // Completed standalone work after the last turn (docs/contract.md#exact-fork): kept unless a turn or an input came first.
        standaloneAfter: async (seq) => {
          const [ends, begins] = await Promise.all([
            this.log.ofTypes(lineage, COMPLETED_STANDALONE_TYPES, { fromSeq: seq + 1, toSeq: last, limit: 1, descending: true }, client),
            this.log.ofTypes(lineage, BEGINS_WORK_TYPES, { fromSeq: seq + 1, toSeq: last, limit: 1 }, client),
          ]);
          const end = ends[0]?.seq;
          return end !== undefined && (begins[0] === undefined || begins[0].seq > end) ? end : undefined;
        },
      },
      cut?.anchorSeq,
    );
  }

  /** One child of a fork: its row and its own events (seed, then its overrides), inside the fork's transaction. */
  private async writeChild(
    client: pg.PoolClient,
    childId: string,
    at: {
      parent: SessionRow;
      lineage: Lineage;
      cutSeq: number;
      atCut: LogState;
      seed: ForkSeed;
      inheritedTitle: string | undefined;
      inheritedModel: SessionModel | null;
    },
    overrides: ChildOverrides,
  ) {
    const { parent, lineage, cutSeq, atCut, seed } = at;
    const own: Array<NewEvent & { seq: number }> = seed.events.map((e) => ({ ...e }));
    // After the seed (firstLiveSeq counts marker and closers only), as if appended at once.
    const add = (e: NewEvent) => own.push({ ...e, seq: seed.firstLiveSeq + own.length - seed.events.length });
    if (overrides.title != null) add({ type: 'session/title', data: { title: overrides.title } });
    if (overrides.model) add({ type: 'session/model', data: overrides.model });
    if (overrides.instructions != null) add({ type: 'session/instructions', data: { text: overrides.instructions } });
    let inputId: string | undefined;
    if (overrides.message != null) {
      inputId = newInputId();
      add({ type: 'inbox/add', data: { inputId, text: overrides.message, ...(overrides.responseFormat ? { responseFormat: overrides.responseFormat } : {}) } });
    }
    for (const e of own) e.data = decodeEvent(e.type, e.data);

    const { after, pendingDeltas } = checkedAppend(childId, atCut, own);
    const model = lastModelIn(own) ?? at.inheritedModel;
    // The child's row as written is the fork's answer: no read after the commit.
    const {
      rows: [session],
    } = await client.query<SessionRow>(
      `INSERT INTO "Session" (id, tenant, "treeId", title, status, "formatVersion", "eventCount", "turnCount", "pendingInputCount",
                              "parentId", "forkedAtSeq", "inheritedEventCount", "firstLiveSeq", "inheritedRanges", runner, "lastTurnFailed",
                              "modelProvider", "modelName", "pendingInputBytes")
       VALUES ($1, $2, $3, $4, 'IDLE', $13, $5, $6, $7, $8, $9, $10, $11, $12, $14, $15, $16, $17, $18)
       RETURNING ${SESSION_COLUMNS_SQL}`,
      [
        childId,
        parent.tenant,
        parent.treeId,
        overrides.title ?? at.inheritedTitle ?? null,
        after.nextSeq,
        after.turnCount,
        after.pendingInputCount,
        // A child of a session an external runner pool runs is run by the same pool.
        parent.id,
        cutSeq,
        seed.inheritedEventCount,
        seed.firstLiveSeq,
        JSON.stringify(childRanges(lineage, cutSeq)),
        CURRENT_FORMAT_VERSION,
        parent.runner ?? null,
        // A turn its seed closes (forked) is its last; else a cut at the parent's end keeps the parent's (earlier cuts start false).
        lastTurnFailedIn(own) ?? (cutSeq === parent.eventCount - 1 && parent.lastTurnFailed),
        model?.provider ?? null,
        model?.model ?? null,
        after.pendingInputBytes,
      ],
    );
    const { rows: written } = await client.query<StoredEvent>(
      `INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount", "dataBytes", tenant)
       SELECT $1, (e->>'seq')::int, $2, e->>'type', e->'data', (e->>'synthetic')::boolean, $3 + (e->>'p')::int, pg_column_size(e->'data'), $5
         FROM jsonb_array_elements($4::jsonb) AS e
       RETURNING seq, type, data, synthetic, "createdAt"`,
      [childId, parent.treeId, atCut.pendingInputCount, JSON.stringify(eventRows(own, pendingDeltas)), parent.tenant],
    );
    await notify(client, SESSIONS_CHANNEL, childId);
    const synthetic = written
      .filter((e) => e.synthetic)
      .sort((a, b) => a.seq - b.seq)
      .map((e) => ({ ...e, id: eventId(childId, e.seq), sessionId: childId, inherited: false }));
    return { session, inputId, after, synthetic };
  }
}
