// Session rows read on the pg pool with prepared statements: the reads a
// dashboard makes all the time (a session, a sessions page, the parents of a
// page). Under the readThroughput bench Prisma's query compiler (wasm) and
// client were a large share of the server's CPU for these; the same rows through a prepared statement cost the
// pg driver's parse alone. Prisma owns the table: its generated `Session` type
// is the row's type (imported as a type only; ARCHITECTURE.md, Database
// tooling); a row read with a column list is typed as the part it holds (PartialSessionRow).
import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Session as SessionRow } from '@prisma/client';
import { statement } from './statements.ts';
import { readCaughtUpOr, type ReadReplicas } from '../db/read-replicas.ts';
import { readingFor, type StatementScope } from '../db/statement-deadlines.ts';
import { leftAsText, parseTimestamptz, timestampsAsText } from '../db/pg-types.ts';
import type { OnStandbyRead } from './session-log.ts';
import type { SessionTrees } from './session-trees.ts';

export type { SessionRow };

/** A position in a sessions page: the keyset of a row, (createdAt, id), or (updatedAt, id) in the 'changed' order. */
export interface SessionKey {
  at: Date;
  id: string;
}

export interface SessionPageQuery {
  tenant: string;
  parentId?: string | null;
  /** Children forked at this seq of their parent (with parentId). */
  forkedAtSeq?: number | null;
  /** Every session of one fork tree (its root's id). */
  treeId?: string | null;
  /** Leave this session out (a session's siblings). */
  excludeId?: string | null;
  status?: 'IDLE' | 'RUNNING' | 'WAITING' | null;
  /** Only sessions changed (created, appended to, imported) at or after this time; with the 'changed' order. */
  changedSince?: Date | null;
  /**
   * Newest first (the sessions list), oldest first (a session's children), or
   * least recently changed first ('changed': by updatedAt; a row changed while
   * a client pages moves past the rest and is read again, never skipped).
   */
  order: 'newest' | 'oldest' | 'changed';
  /** Rows after (forward) or before (backward) this key in that order. */
  from?: SessionKey | null;
  backward?: boolean;
  limit: number;
  /** The scope of the request it is read for (db/statement-deadlines.ts). */
  statements?: StatementScope;
}

export type SessionColumn = keyof SessionRow;

/**
 * Where a session row may be read: the primary, or a hot standby that has
 * replayed all the primary had written when the read began (read-replicas.ts
 * readCaughtUp; else the primary). Queries read from a standby; whatever must
 * see its own write, or runs inside a write, reads the primary.
 */
export type ReadFrom = 'primary' | 'standby';

/**
 * Columns to read: all of them (null) or a list (the GraphQL layer asks for
 * what a query selects). A row read with a list has only those columns set.
 */
export type SessionColumns = readonly SessionColumn[] | null;

/** Read with every list: a page's keyset (createdAt, id), and what names the row. */
const ALWAYS_READ = ['id', 'createdAt'] as const;
/** Read with every list of rows by id: whose they are, for the caller's filter (TenantSessions.byIds). */
const BY_ID_READ = [...ALWAYS_READ, 'tenant'] as const;
/** Read with every list in the 'changed' order: its keyset (updatedAt, id) too. */
const CHANGED_ORDER_READ = [...ALWAYS_READ, 'updatedAt'] as const;

/**
 * A row read with a column list, typed as what it holds: id and createdAt,
 * and whichever of the rest the list named.
 */
export type PartialSessionRow = Pick<SessionRow, (typeof ALWAYS_READ)[number]> & Partial<SessionRow>;

/** A row read with a literal list of columns: those, id and createdAt. */
export type SessionRowWith<C extends SessionColumn> = Pick<SessionRow, C | (typeof ALWAYS_READ)[number]>;

/** Every column of a session row, in table order (a full read names them: no `SELECT *`). */
export const SESSION_COLUMNS = [
  'id',
  'tenant',
  'treeId',
  'title',
  'status',
  'formatVersion',
  'eventCount',
  'turnCount',
  'lastTurnFailed',
  'pendingInputCount',
  'pendingInputBytes',
  'parentId',
  'forkedAtSeq',
  'inheritedEventCount',
  'firstLiveSeq',
  'inheritedRanges',
  'leaseOwner',
  'leaseExpiresAt',
  'leaseToken',
  'createdAt',
  'updatedAt',
  'runner',
  'modelProvider',
  'modelName',
  'cancelTurn',
] as const satisfies readonly (keyof SessionRow)[];
// A column Prisma's Session has and the list lacks fails type-checking here.
const everyColumnListed: Exclude<keyof SessionRow, (typeof SESSION_COLUMNS)[number]> extends never ? true : never = true;
void everyColumnListed;
/** A model as a session/model event names it. */
export interface SessionModel {
  provider: string;
  model: string;
}

/** The model in force at the end of a row's log (kept in the row by appends, forks and imports); null: none set. */
export const modelOfRow = (row: Pick<SessionRow, 'modelProvider' | 'modelName'>): SessionModel | null =>
  row.modelProvider != null && row.modelName != null ? { provider: row.modelProvider, model: row.modelName } : null;

/**
 * A fork, in the terms Session_parentId_createdAt_idx and Session_treeId_id_idx
 * are partial on: a fork lies in its root's tree, a root or an imported
 * session is its own tree (migration 20261217080001_session_fork_indexes_partial).
 * Every read of a session's children or a tree's forks states it, or the
 * planner cannot use those indexes: a root, most sessions, has no entry there
 * for its appends to write.
 */
export const isFork = (alias = '') => `${alias}"treeId" <> ${alias}id`;

export const SESSION_COLUMNS_SQL = SESSION_COLUMNS.map((c) => `"${c}"`).join(', ');

const COLUMN_NAME = /^[A-Za-z]+$/;
/** Statements prepared per connection at most, by shape (columns, filters, order): clients use a handful. */
const MAX_PREPARED_SHAPES = 64;

export class SessionRows {
  private readonly byIdsStatement: ReturnType<typeof statement>;
  private readonly statements = new Map<string, ReturnType<typeof statement>>();

  constructor(
    private readonly pool: pg.Pool,
    /** Which tree each session lies in: a read by id names it (session-trees.ts). */
    private readonly trees: SessionTrees,
    private readonly prepare = true,
    /** Hot standbys: session lists (and rows read `from: 'standby'`) are read there when one has caught up with the request (read-replicas.ts). */
    private readonly standbys?: Pick<ReadReplicas, 'readCaughtUp'>,
    private readonly onStandbyRead?: OnStandbyRead,
  ) {
    this.byIdsStatement = statement(
      prepare,
      'sessions_by_ids',
      `SELECT ${SESSION_COLUMNS_SQL} FROM "Session" WHERE id = ANY($1::text[]) AND "treeId" = ANY($2::text[])`,
    );
  }

  /** Whose session it is (the agent asks, once, when a tool server is limited to tenants). */
  async tenantOf(id: string, statements?: StatementScope): Promise<string | undefined> {
    const db = readingFor(this.pool, statements);
    const treeId = await this.trees.of(id, db);
    if (treeId === undefined) return undefined;
    const { rows } = await db.query<{ tenant: string }>('SELECT tenant FROM "Session" WHERE id = $1 AND "treeId" = $2', [id, treeId]);
    return rows[0]?.tenant;
  }

  /** `statements`: the scope of the request it is read for (db/statement-deadlines.ts); its tree's lookup too. */
  get(tenant: string, id: string): Promise<SessionRow | null>;
  get<C extends SessionColumn>(
    tenant: string,
    id: string,
    columns: readonly [C, ...C[]],
    from?: ReadFrom,
    statements?: StatementScope,
  ): Promise<SessionRowWith<C> | null>;
  get(tenant: string, id: string, columns: SessionColumns, from?: ReadFrom, statements?: StatementScope): Promise<PartialSessionRow | null>;
  async get(
    tenant: string,
    id: string,
    columns: SessionColumns = null,
    from: ReadFrom = 'primary',
    statements?: StatementScope,
  ): Promise<PartialSessionRow | null> {
    const treeId = this.trees.known(id) ?? (await this.trees.of(id, readingFor(this.pool, statements)));
    if (treeId === undefined) return null;
    const query = this.run(`SELECT ${list(columns)} FROM "Session" WHERE id = $1 AND "treeId" = $3 AND tenant = $2`, true)([id, tenant, treeId]);
    const { rows } =
      from === 'standby'
        ? await readCaughtUpOr(
            this.standbys,
            this.pool,
            (db) => db.query<PartialSessionRow>(query),
            (served) => this.onStandbyRead?.(served, 'session'),
            statements,
          )
        : await readingFor(this.pool, statements).query<PartialSessionRow>(query);
    return rows[0] ?? null;
  }

  /**
   * Rows by id, any tenant (callers filter), in one statement (on the shards
   * of their trees). With `columns`, those, id, createdAt and tenant only.
   */
  byIds(ids: readonly string[]): Promise<SessionRow[]>;
  byIds(ids: readonly string[], columns: SessionColumns, statements?: StatementScope): Promise<PartialSessionRow[]>;
  async byIds(ids: readonly string[], columns: SessionColumns = null, statements?: StatementScope): Promise<PartialSessionRow[]> {
    if (ids.length === 0) return [];
    const db = readingFor(this.pool, statements);
    const trees = await this.trees.ofMany(ids, db);
    if (trees.size === 0) return [];
    const run = columns
      ? this.run(`SELECT ${list(columns, BY_ID_READ)} FROM "Session" WHERE id = ANY($1::text[]) AND "treeId" = ANY($2::text[])`, true)
      : this.byIdsStatement;
    return (await db.query<PartialSessionRow>(run([[...trees.keys()], [...new Set(trees.values())]]))).rows;
  }

  /**
   * Up to `limit` rows of a keyset page, in page order (a backward page is
   * returned in forward order too). The bounds are in SQL: a page costs its
   * rows, on the (tenant, createdAt, id) or (parentId, createdAt) index (a
   * tree's: its forks on (treeId, id) and its root, sorted).
   */
  page(q: SessionPageQuery): Promise<SessionRow[]>;
  page(q: SessionPageQuery, columns: SessionColumns): Promise<PartialSessionRow[]>;
  async page(q: SessionPageQuery, columns: SessionColumns = null): Promise<PartialSessionRow[]> {
    if (q.parentId != null && q.treeId == null) {
      // A session's children lie in its tree: the page is read there.
      const treeId = this.trees.known(q.parentId) ?? (await this.trees.of(q.parentId, readingFor(this.pool, q.statements)));
      if (treeId === undefined) return [];
      q = { ...q, treeId };
    }
    const where = ['tenant = $1'];
    const values: unknown[] = [q.tenant];
    if (q.parentId != null) where.push(`"parentId" = ${param(values, q.parentId)}`, isFork());
    if (q.forkedAtSeq != null) where.push(`"forkedAtSeq" = ${param(values, q.forkedAtSeq)}`);
    if (q.treeId != null && q.parentId == null) {
      // A whole tree: its forks through Session_treeId_id_idx (forks only), its root by the key. Each arm has its
      // own indexable condition (a bitmap OR of the two); the tree named outside them too (a distributed Postgres routes on it).
      const tree = param(values, q.treeId);
      where.push(`"treeId" = ${tree}`, `(("treeId" = ${tree} AND ${isFork()}) OR id = ${tree})`);
    } else if (q.treeId != null) where.push(`"treeId" = ${param(values, q.treeId)}`);
    if (q.excludeId != null) where.push(`id <> ${param(values, q.excludeId)}`);
    if (q.status != null) where.push(`status = ${param(values, q.status)}::"SessionStatus"`);
    // The 'changed' order is the (tenant, updatedAt, id) index's.
    const key = q.order === 'changed' ? '"updatedAt"' : '"createdAt"';
    if (q.changedSince != null) where.push(`"updatedAt" >= ${param(values, q.changedSince)}::timestamptz`);
    // Newest first reads the index backwards; a backward page reverses the order again.
    const descending = (q.order === 'newest') !== Boolean(q.backward);
    if (q.from) {
      where.push(`(${key}, id) ${descending ? '<' : '>'} (${param(values, q.from.at)}::timestamptz, ${param(values, q.from.id)})`);
    }
    const dir = descending ? 'DESC' : 'ASC';
    const text = `SELECT ${list(columns, q.order === 'changed' ? CHANGED_ORDER_READ : ALWAYS_READ)} FROM "Session" WHERE ${where.join(' AND ')} ORDER BY ${key} ${dir}, id ${dir} LIMIT ${param(values, q.limit)}`;
    // A status filter's best plan depends on the status (few RUNNING, many IDLE): not prepared.
    const query = this.run(text, q.status == null)(values) as pg.QueryArrayConfig;
    query.rowMode = 'array';
    query.types = timestampsAsText;
    const { rows, fields } = await readCaughtUpOr(
      this.standbys,
      this.pool,
      (db) => db.query(query),
      (served) => this.onStandbyRead?.(served, 'sessions'),
      q.statements,
    );
    const layout = layoutOf(text, fields);
    const page = rows.map((values: unknown[]) => new PageRow(values, layout) as unknown as PartialSessionRow);
    return q.backward ? page.reverse() : page;
  }

  /** How many sessions a tenant has: one index-only count (a list that resumed from changes checks it held every deletion). */
  async count(tenant: string, statements?: StatementScope): Promise<number> {
    const { rows } = await readingFor(this.pool, statements).query<{ n: number }>(
      this.run('SELECT count(*)::int AS n FROM "Session" WHERE tenant = $1', true)([tenant]),
    );
    return rows[0].n;
  }

  /** The seqs of a session its children were forked at, each with how many: one grouped scan of its children. */
  async forkPoints(tenant: string, parentId: string, statements?: StatementScope): Promise<Array<{ seq: number; childCount: number }>> {
    const db = readingFor(this.pool, statements);
    const treeId = await this.trees.of(parentId, db);
    if (treeId === undefined) return [];
    const { rows } = await db.query<{ seq: number; childCount: number }>(
      this.run(
        `SELECT "forkedAtSeq" AS seq, count(*)::int AS "childCount" FROM "Session" WHERE "parentId" = $1 AND "treeId" = $3 AND ${isFork()} AND tenant = $2 AND "forkedAtSeq" IS NOT NULL GROUP BY "forkedAtSeq" ORDER BY "forkedAtSeq"`,
        true,
      )([parentId, tenant, treeId]),
    );
    return rows;
  }

  private run(text: string, preparable: boolean) {
    let run = this.statements.get(text);
    if (!run) {
      const prepare = this.prepare && preparable && this.statements.size < MAX_PREPARED_SHAPES;
      // Named by the text: the same shape has the same name on every connection, whoever prepares it.
      run = statement(prepare, `sessions_${createHash('sha1').update(text).digest('hex').slice(0, 16)}`, text);
      if (this.statements.size < MAX_PREPARED_SHAPES * 4) this.statements.set(text, run);
    }
    return run;
  }
}

/**
 * A page's rows as read in pg's array mode, with timestamps as Postgres's
 * text, and read through the getters below. pg builds an object row by
 * storing each column under its name, one store for the rows of every
 * statement the process runs (megamorphic here, where a raw server with four
 * statements pays far less for it); and a timestamp is parsed only when read
 * — a sessions page asked for no cursor or date never reads its keyset's
 * createdAt, which was most of what mapping its rows cost (CPU profiles under
 * npm run bench:read-alternation). A row is typed as the row it stands for:
 * its columns are properties, of its prototype — read them by name (a spread
 * or Object.keys sees none).
 */
class PageRow {
  constructor(
    readonly values: unknown[],
    /** Where each of SESSION_COLUMNS is in `values` (layoutOf). */
    readonly layout: readonly number[],
  ) {}
}

/**
 * A column's place in a row's values, as layoutOf writes it: -1, not read;
 * i >= 0, the value at i; i <= -2, a timestamp left as text at -2 - i (parsed
 * the first time it is read). One number, so reading a plain column costs what
 * it did before timestamps were told apart by their type: a page's getters run
 * several times per field and row.
 */
const NOT_READ = -1;
const textAt = (i: number) => -2 - i;

SESSION_COLUMNS.forEach((column, k) => {
  function get(this: PageRow) {
    const i = this.layout[k];
    if (i >= 0) return this.values[i];
    if (i === NOT_READ) return undefined;
    const at = textAt(i);
    const v = this.values[at];
    return typeof v === 'string' ? (this.values[at] = parseTimestamptz(v)) : v;
  }
  Object.defineProperty(PageRow.prototype, column, { get, enumerable: true });
});

/**
 * Per statement text: where each of SESSION_COLUMNS is in its rows, and which
 * are timestamps left as text, by their result fields' types (pg-types.ts
 * leftAsText); a statement's columns and their types are fixed by its text.
 */
const layouts = new Map<string, readonly number[]>();
function layoutOf(text: string, fields: readonly pg.FieldDef[]): readonly number[] {
  let layout = layouts.get(text);
  if (!layout) {
    layout = SESSION_COLUMNS.map((c) => {
      const i = fields.findIndex((f) => f.name === c);
      return i < 0 ? NOT_READ : leftAsText(fields[i].dataTypeID) ? textAt(i) : i;
    });
    if (layouts.size < MAX_PREPARED_SHAPES * 4) layouts.set(text, layout);
  }
  return layout;
}

/** `v` as the statement's next parameter: its placeholder. */
function param(values: unknown[], v: unknown): string {
  values.push(v);
  return `$${values.length}`;
}

/** Column lists by the selection's columns (one array per selection: session-columns.ts) and the columns always read. */
const lists = new WeakMap<readonly SessionColumn[], WeakMap<readonly SessionColumn[], string>>();

function list(columns: SessionColumns, alwaysRead: readonly SessionColumn[] = ALWAYS_READ): string {
  if (!columns) return SESSION_COLUMNS_SQL;
  let byAlwaysRead = lists.get(columns);
  if (!byAlwaysRead) lists.set(columns, (byAlwaysRead = new WeakMap()));
  let text = byAlwaysRead.get(alwaysRead);
  if (text === undefined) byAlwaysRead.set(alwaysRead, (text = listOf(columns, alwaysRead)));
  return text;
}

function listOf(columns: readonly SessionColumn[], alwaysRead: readonly SessionColumn[]): string {
  const all = [...alwaysRead.filter((c) => !columns.includes(c)), ...columns];
  for (const c of all) if (!COLUMN_NAME.test(c)) throw new Error(`not a Session column: ${c}`);
  return all.map((c) => `"${c}"`).join(', ');
}
