// The one way to read a session's log (docs/contract.md#log: cost never grows with the
// log). Every reader — the GraphQL events connection, node(id), fork payloads,
// subscription catch-up, export, the agent — goes through here; nothing else
// reads the Event table but full-text search (session-search.ts), which finds
// matching rows across logs, not logs.
//
// Reads are keyset scans on (sessionId, treeId, seq) or (sessionId, type, seq) with
// their bounds in SQL. A fork's inherited prefix is resolved through its
// lineage (store/lineage.ts): since the log is contiguous, a page of seqs
// lo..hi maps to exact (source, from, to) segments, and one statement reads
// them all. Nobody above the store knows whether a prefix is shared.
import { LRUCache } from 'lru-cache';
import type pg from 'pg';
import type { LogEvent } from '../core/events.ts';
import { asCoreEvent, dataOf } from '../core/core-event.ts';
import { LogState, pendingInputOf, type OpenTail, type PendingInput } from '../core/log-state.ts';
import { FILES_CHANGE, type FilesChangeData } from '../core/file-tree.ts';
import { sessionNotFound } from '../core/errors.ts';
import type { BoundedText, TextBudget } from '../core/text-budget.ts';
import { roundUsd, type Usage } from '../core/turn-summary.ts';
import { statement } from './statements.ts';
import { eventId } from './ids.ts';
import { lineageOf, segmentsOf, type Lineage, type LineageRow, type Segment } from './lineage.ts';
import type { ReadReplicas } from '../db/read-replicas.ts';
import { readingFor, StatementAbandonedError, StatementTimeoutError, type StatementScope } from '../db/statement-deadlines.ts';
import { SessionTrees } from './session-trees.ts';

/** An event as read through a session. */
export interface StoredEvent extends LogEvent {
  /** Derived from (the session read through, seq): a row shared by a parent and a child has two ids. */
  id: string;
  /** The session it was read through. */
  sessionId: string;
  inherited: boolean;
  synthetic: boolean;
  createdAt: Date;
  /**
   * Read without its text (TypesQuery.withoutTexts): that text's length in characters, null when it has none (TEXT_LENGTH).
   * A reader of the text within a budget takes it before reading, so the text is one statement (textWithin).
   */
  textLength?: number | null;
}

/**
 * Whether a page read reads the events' `data`: a reader whose caller needs
 * only their seq, type, origin and time (a GraphQL selection without
 * `Event.data`) reads none, and its events' `data` is undefined. Such a page
 * holds a few bytes an event, so no byte budget applies to it.
 * `statements`: the scope of the request the page is read for: its
 * statements are bounded by it, and cancelled once its client has gone
 * (db/statement-deadlines.ts). `bytes`: what the page may hold of event
 * data (at most PAGE_BYTES, plus the one event that passes it): what is left
 * of the request's budget, when a request reads several pages.
 */
export interface PageShape {
  data?: boolean;
  statements?: StatementScope;
  bytes?: number;
}

/** How inboxAddOf reads its event: PageShape, or `withoutTexts` (TypesQuery.withoutTexts: its text's length, not the text). */
export type InboxAddShape = PageShape & { withoutTexts?: boolean };

/** Where an event comes from, for filters: any; a fork's inherited prefix; the rest; repair's and forks' synthetic events. */
export type EventOrigin = 'any' | 'inherited' | 'own' | 'synthetic';

/** A connection or the pool: reads inside a transaction see its snapshot. */
export type Db = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

/** Who answered a read from a standby: the standby, the primary (standby behind or down), or both (the primary the rest). */
export type StandbyRead = 'standby' | 'primary' | 'both';
/** What a read meant for a standby was: event pages (and catch-up), session lists, one session's row, searchSessions. */
export type StandbyReadKind = 'events' | 'sessions' | 'session' | 'search';
/** Told of each read meant for a standby (the forkline_standby_reads_total metric). */
export type OnStandbyRead = (served: StandbyRead, read: StandbyReadKind) => void;

/** A session to read: its id (lineage looked up, cached) or its lineage. */
export type LogRef = string | Lineage;

interface Row {
  seq: number;
  type: string;
  data: unknown;
  synthetic: boolean;
  createdAt: Date;
  /** TEXT_LENGTH, when read without texts. */
  tl?: number | null;
}

const COLUMNS = 'seq, type, data, synthetic, "createdAt"';
/** COLUMNS without the data: a page read that does not need it (PageShape). */
const HEAD_COLUMNS = 'seq, type, synthetic, "createdAt"';

/**
 * What a page read holds of event data at most, plus the one event that
 * passes it: a page is a count of events, and an event can be megabytes (a
 * recording's line is up to 16 MiB), so a page of 500 could make the process
 * hold gigabytes. A page cut short by bytes says so (`cut`); a caller pages on
 * from its last event.
 */
export const PAGE_BYTES = 16 * 1024 * 1024;
/**
 * What a reader that goes through a whole log holds of event data per page
 * (within PAGE_BYTES): the agent's fold, an export. Such a reader keeps little
 * of each event, so a page of large events is most of what it holds while
 * it reads; a page of small events is cut by its count long before this.
 */
export const STREAM_PAGE_BYTES = 4 * 1024 * 1024;
/** How many change sets, and how many bytes of their data, a reader of a whole history takes per page (fileChangeSetPages). */
export interface ChangeSetPage {
  pageSize: number;
  pageBytes: number;
}
export const CHANGE_SET_PAGE: ChangeSetPage = { pageSize: 500, pageBytes: STREAM_PAGE_BYTES };
/**
 * An event's size, known before its data is read: "dataBytes", the size of its
 * `jsonb` as written (migration 20261215000001_event_data_bytes); the stored
 * (possibly compressed) size for rows written before it.
 */
const DATA_BYTES = 'coalesce("dataBytes", pg_column_size(data))';
/**
 * COLUMNS for a read under a byte budget: with each row's size (`b`), and
 * without the data of a row over `share` bytes (the budget over the rows
 * asked for), which is read apart only if the budget keeps it. Rows of at most
 * `share` each cannot pass the budget together, so a log of small events is
 * read in one statement, as without a budget (a running sum in SQL, a window,
 * doubled the statement's time).
 */
const sizedColumns = (share: string) =>
  `seq, type, CASE WHEN ${DATA_BYTES} > ${share} THEN NULL ELSE data END AS data, synthetic, "createdAt", ${DATA_BYTES} AS b`;

/** A budget's share per row asked for (at least 1 byte). */
const shareOf = (bytes: number, rows: number) => Math.max(1, Math.floor(bytes / Math.max(1, rows)));

interface SizedRow extends Row {
  b: number;
}

/**
 * A row of COLUMNS (and `b`, read under a budget) in pg's array mode: what a page read takes. pg builds an object
 * per row otherwise, keyed by column name, which the page then copied into a StoredEvent: on an events page of 100
 * that was a share of the server's CPU per request (npm run bench:read-alternation).
 */
type Tuple = [seq: number, type: string, data: unknown, synthetic: boolean, createdAt: Date, b?: number];

/** How withinBytes reads a row: a SizedRow, or a Tuple read in array mode. */
interface SizedLayout<R> {
  seq(r: R): number;
  bytes(r: R): number;
  event(l: Lineage, r: R): StoredEvent;
}
const ROW_LAYOUT: SizedLayout<SizedRow> = { seq: (r) => r.seq, bytes: (r) => Number(r.b), event: toStored };
const TUPLE_LAYOUT: SizedLayout<Tuple> = { seq: (r) => r[0], bytes: (r) => Number(r[5]), event: tupleToStored };

const queryOf = (text: string, values: unknown[]): pg.QueryConfig => ({ text, values });

/** `query` read in pg's array mode (Tuple). */
function asTuples(query: pg.QueryConfig): pg.QueryArrayConfig {
  const q = query as pg.QueryArrayConfig;
  q.rowMode = 'array';
  return q;
}

/** One statement reading `segments`' ranges in seq order `dir`: a scan of the key per segment, its bounds as parameters. */
function rangeUnion(segments: readonly Segment[], columns: string, dir: 'ASC' | 'DESC', params: unknown[] = []): [string, unknown[]] {
  const p = (v: unknown) => `$${params.push(v)}`;
  const scans = segments.map(
    (seg) =>
      `(SELECT ${columns} FROM "Event" WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)} ORDER BY seq ${dir})`,
  );
  return [`SELECT * FROM (${scans.join(' UNION ALL ')}) e ORDER BY seq ${dir}`, params];
}

/** Events read under a byte budget: `cut` when the budget stopped the read before the range (or limit) did. */
export interface BoundedEvents {
  events: StoredEvent[];
  cut: boolean;
  /** The data bytes the events hold, when read under a budget. */
  bytes?: number;
}

/** A scan of some types' events: from `fromSeq` up (or from `toSeq` down when `descending`, newest first), at most `limit`. */
interface TypesQuery {
  fromSeq: number;
  toSeq: number;
  limit: number;
  descending?: boolean;
  /** Only synthetic events. */
  synthetic?: boolean;
  /** Without their texts (WITHOUT_TEXTS): for a reader of an answer's calls and usage, an input's id, an error's code. */
  withoutTexts?: boolean;
}

/**
 * An event's data as a reader of steps takes it (turn-reads.ts): a
 * model/message without its text and its calls' arguments, each of which can be
 * megabytes (a recording's line), so that a turn's steps cost their count,
 * not their words. Postgres leaves them out; the rest of the data is as stored.
 * So are an inbox/add's text and an error report's message (read apart within a
 * budget: textWithin).
 */
const WITHOUT_TEXTS =
  `CASE WHEN type = 'model/message' THEN jsonb_set(data || '{"text": ""}', '{toolCalls}', coalesce((SELECT jsonb_agg(c || '{"arguments": ""}' ORDER BY i)` +
  ` FROM jsonb_array_elements(data -> 'toolCalls') WITH ORDINALITY AS t(c, i)), '[]'::jsonb))` +
  ` WHEN type = 'inbox/add' THEN data || '{"text": ""}' WHEN type = 'plugin/agent/error' THEN data || '{"message": ""}' ELSE data END AS data`;

/** The text fields textWithin reads: an answer's or an input's `text`, an error report's `message`. */
export type TextKey = 'text' | 'message';
/** The length of a string field of `data` in characters, null when it is not a string. */
const lengthOf = (key: TextKey) => `CASE WHEN jsonb_typeof(data -> '${key}') = 'string' THEN length(data ->> '${key}') END`;
/**
 * The length of the text WITHOUT_TEXTS leaves out (`tl`; StoredEvent.textLength), read with the row: a reader of the
 * text then knows what to take of its budget before it reads, and reads it in one statement (textWithin).
 */
const TEXT_LENGTH = `CASE type WHEN 'model/message' THEN ${lengthOf('text')} WHEN 'inbox/add' THEN ${lengthOf('text')} WHEN 'plugin/agent/error' THEN ${lengthOf('message')} END AS tl`;
/** COLUMNS without the texts, with their lengths. */
const TEXTLESS_COLUMNS = `${COLUMNS.replace('data', WITHOUT_TEXTS)}, ${TEXT_LENGTH}`;
const LINEAGE_CACHE_SIZE = 10_000;
/** Past any seq (seqs are int4): a bound that means "to the end of the log". */
export const MAX_SEQ = 2 ** 31 - 1;

/**
 * Each answer's (model/message's) data without its text, read once per row: every `data->` of a row reads its whole
 * value again (a stored answer can be megabytes), so five of them took five times as long (0.45 s, not 0.09 s, on a
 * turn of 100 MB of answers). OFFSET 0 keeps the planner from pasting the expression into each use.
 */
const ANSWER_DATA = `LATERAL (SELECT CASE WHEN e.type = 'model/message' THEN e.data - 'text' END AS a OFFSET 0) answer`;
/**
 * Sums over the answers (ANSWER_DATA) of their tool calls and of the usage they reported: the one definition of
 * what a turn's (SessionLog.turnTotals) and a session's (SessionLog.segmentTotals) tokens and cost are. Numeric,
 * not bigint: a count written before its bound (MAX_REPORTED_TOKENS), e.g. 1e+308, still sums instead of failing
 * the read.
 */
const ANSWER_SUMS =
  `coalesce(sum(jsonb_array_length(a->'toolCalls')), 0) AS calls,` +
  ` coalesce(sum((a->'usage'->>'inputTokens')::numeric), 0) AS input, coalesce(sum((a->'usage'->>'outputTokens')::numeric), 0) AS output,` +
  ` coalesce(sum((a->'usage'->>'costUsd')::numeric), 0) AS cost, count(a->'usage'->'costUsd') AS costed, count(a->'usage') AS reported`;
const ANSWER_SUM_COLUMNS = ['calls', 'input', 'output', 'cost', 'costed', 'reported'] as const;

/** ANSWER_SUMS as they arrive: counts and sums as text (bigint, numeric). */
interface AnswerSums {
  calls: string;
  input: string;
  output: string;
  /** Summed costUsd of the answers that have one, and how many do (none: the cost is unknown). */
  cost: string;
  costed: string;
  /** Answers that reported usage at all (none: the usage is unknown). */
  reported: string;
}

/** The usage AnswerSums add up to, as Turn.usage serves it: null when no answer reported any. */
const usageOfSums = (r: AnswerSums): Usage | null =>
  Number(r.reported) > 0
    ? { inputTokens: Number(r.input), outputTokens: Number(r.output), costUsd: Number(r.costed) > 0 ? roundUsd(Number(r.cost)) : null }
    : null;

/** A turn's totals over all its events (SessionLog.turnTotals). */
export interface TurnTotals {
  steps: number;
  toolCalls: number;
  /** Over all its answers; null when none reported usage. */
  usage: Usage | null;
}

/** One lineage segment's sums (SessionLog.segmentTotals); counts and sums arrive as text (bigint, numeric). */
export interface SegmentTotals extends AnswerSums {
  starts: string;
  ends: string;
  steps: string;
  /** The segment's turn/ends' times less its turn/starts' (ms): summed exactly here, so it stays small however long the log. */
  span_ms: string;
  last_start_ms: string | null;
  /** The highest seq summed (null: none of the segment's events is a turn bracket or an answer). */
  last_seq: number | null;
  /** Seqs of the turn/ends a fork wrote (reason `forked`), with when they were written. */
  forked: Array<{ seq: number; ms: number }> | null;
  /** Seqs of the turn/ends crash repair wrote (synthetic, reason `interrupted`), with when they were written. */
  interrupted: Array<{ seq: number; ms: number }> | null;
}

export class SessionLog {
  /** Lineages never change once a session exists, so they are cached (evicted on deletion). */
  private readonly lineages = new LRUCache<string, Lineage>({ max: LINEAGE_CACHE_SIZE });
  /** Which tree each session lies in: what a statement on its rows names. */
  readonly trees: SessionTrees;

  private readonly lineageStatement: ReturnType<typeof statement>;
  private readonly rangeStatement: ReturnType<typeof statement>;
  private readonly rangeWithinStatement: Record<'ASC' | 'DESC', ReturnType<typeof statement>>;
  private readonly rangeHeadsStatement: ReturnType<typeof statement>;
  /** What a page read holds of event data at most, plus one event (PAGE_BYTES). */
  readonly pageBytes: number;

  private readonly standbys?: Pick<ReadReplicas, 'pick'>;
  private readonly onStandbyRead?: OnStandbyRead;

  constructor(
    private readonly pool: pg.Pool,
    opts: { prepare?: boolean; standbys?: Pick<ReadReplicas, 'pick'>; onStandbyRead?: OnStandbyRead; trees?: SessionTrees; pageBytes?: number } = {},
  ) {
    const prepare = opts.prepare ?? true;
    this.pageBytes = opts.pageBytes ?? PAGE_BYTES;
    this.standbys = opts.standbys;
    this.onStandbyRead = opts.onStandbyRead;
    this.trees = opts.trees ?? new SessionTrees(pool, { prepare });
    this.lineageStatement = statement(
      prepare,
      'lineage',
      'SELECT id, "treeId", "inheritedRanges", "inheritedEventCount" FROM "Session" WHERE id = $1 AND "treeId" = $2',
    );
    // A range of one session's rows: the primary key serves it whatever the values, so a generic plan is safe.
    this.rangeStatement = statement(
      prepare,
      'range',
      `SELECT ${COLUMNS} FROM "Event" WHERE "sessionId" = $1 AND seq BETWEEN $2 AND $3 AND "treeId" = $4 ORDER BY seq`,
    );
    const rangeWithin = (dir: 'ASC' | 'DESC') =>
      statement(
        prepare,
        `range_within_${dir.toLowerCase()}`,
        `SELECT ${sizedColumns('$5')} FROM "Event" WHERE "sessionId" = $1 AND seq BETWEEN $2 AND $3 AND "treeId" = $4 ORDER BY seq ${dir}`,
      );
    this.rangeWithinStatement = { ASC: rangeWithin('ASC'), DESC: rangeWithin('DESC') };
    this.rangeHeadsStatement = statement(
      prepare,
      'range_heads',
      `SELECT ${HEAD_COLUMNS} FROM "Event" WHERE "sessionId" = $1 AND seq BETWEEN $2 AND $3 AND "treeId" = $4 ORDER BY seq`,
    );
  }

  /** The session whose own rows hold event `seq` of this log (an ancestor's when the event was inherited); undefined when none does. */
  async storedBy(ref: LogRef, seq: number): Promise<string | undefined> {
    const lineage = await this.lineage(ref);
    return lineage && segmentsOf(lineage, seq, seq)[0]?.sessionId;
  }

  /** The lineage of a session, or undefined when it does not exist. */
  async lineage(ref: LogRef, db: Db = this.pool): Promise<Lineage | undefined> {
    if (typeof ref !== 'string') return ref;
    const cached = this.lineages.get(ref);
    if (cached) return cached;
    const treeId = await this.trees.of(ref, db);
    if (treeId === undefined) return undefined;
    const { rows } = await db.query<LineageRow>(this.lineageStatement([ref, treeId]));
    return rows[0] && this.remember(rows[0]);
  }

  /** The session's lineage when this process has it cached (no read). */
  cached(sessionId: string): Lineage | undefined {
    return this.lineages.get(sessionId);
  }

  /** The session's tree when this process knows it (no read). */
  knownTree(sessionId: string): string | undefined {
    return this.lineages.get(sessionId)?.treeId ?? this.trees.known(sessionId);
  }

  /** Caches the lineage of a session row the caller already holds. */
  remember(row: LineageRow): Lineage {
    return this.rememberLineage(lineageOf(row));
  }

  /** Caches a lineage the caller already holds (read with the session's lease, say). */
  rememberLineage(l: Lineage): Lineage {
    this.trees.remember(l.sessionId, l.treeId);
    // A snapshot's bound belongs to one read, not to the session.
    this.lineages.set(
      l.sessionId,
      l.endSeq === undefined ? l : { sessionId: l.sessionId, treeId: l.treeId, ranges: l.ranges, inheritedEventCount: l.inheritedEventCount },
    );
    return l;
  }

  forget(sessionIds: Iterable<string>) {
    const ids = [...sessionIds];
    for (const id of ids) this.lineages.delete(id);
    this.trees.forget(ids);
  }

  /**
   * Deletes at most `limit` of the events a deleted session wrote, from seq
   * `fromSeq` on, in seq order: one chunk of a deletion's reclaim
   * (store/reclaim.ts), in its transaction. Events have no foreign key to
   * their session (migration 20261214010002_event_without_session_key), so
   * they outlive its row until reclaimed. `last`: the last seq deleted.
   */
  async deleteChunkWrittenBy(sessionId: string, treeId: string, fromSeq: number, limit: number, db: Db): Promise<{ deleted: number; last: number }> {
    const { rows } = await db.query<{ deleted: number; last: number | null }>(
      `WITH gone AS (
         DELETE FROM "Event" WHERE ("sessionId", "treeId", seq) IN (
           SELECT "sessionId", "treeId", seq FROM "Event" WHERE "sessionId" = $1 AND "treeId" = $2 AND seq >= $3 ORDER BY seq LIMIT $4)
         RETURNING seq)
       SELECT count(*)::int AS deleted, max(seq) AS last FROM gone`,
      [sessionId, treeId, fromSeq, limit],
    );
    return { deleted: rows[0].deleted, last: rows[0].last ?? fromSeq - 1 };
  }

  /** Events with seq > afterSeq, ascending, at most `limit` (whatever their bytes: for callers that need them all). */
  async page(ref: LogRef, afterSeq: number, limit: number, db: Db = this.pool): Promise<StoredEvent[]> {
    return (await this.read(ref, afterSeq + 1, afterSeq + limit, db)).events;
  }

  /** page(), cut once the events passed hold `bytes` of data (PAGE_BYTES, or less when the caller asks): what a request may read. */
  pageWithin(ref: LogRef, afterSeq: number, limit: number, db: Db = this.pool, bytes = this.pageBytes): Promise<BoundedEvents> {
    return this.read(ref, afterSeq + 1, afterSeq + limit, db, { bytes: Math.min(bytes, this.pageBytes), fromEnd: false });
  }

  /** The (at most) `limit` events right before `beforeSeq`, ascending. */
  async pageBefore(ref: LogRef, beforeSeq: number, limit: number, db: Db = this.pool): Promise<StoredEvent[]> {
    return (await this.read(ref, Math.max(0, beforeSeq - limit), beforeSeq - 1, db)).events;
  }

  /**
   * page(), read from a hot standby when there is one (DATABASE_READ_URL).
   * `committedThrough`: the last seq the caller knows committed (its session
   * row's eventCount - 1, the newest seq it was notified of); undefined: it
   * knows none. Events never change once written, so what the standby has of
   * the range is the primary's; whatever it lacks up to `committedThrough` (or,
   * when unknown, to the end of the range) is read from the primary. So the
   * caller never sees less than it knew of, whichever answered. Held to
   * PAGE_BYTES as pageWithin() is (`cut`), unless read without data (`shape`).
   */
  pageFromStandby(ref: LogRef, afterSeq: number, limit: number, committedThrough?: number, shape: PageShape = {}): Promise<BoundedEvents> {
    return this.readFromStandby(ref, afterSeq + 1, afterSeq + limit, committedThrough, false, shape);
  }

  /** pageBefore(), read as pageFromStandby reads: a cut keeps the events nearest `beforeSeq`. */
  pageBeforeFromStandby(ref: LogRef, beforeSeq: number, limit: number, committedThrough?: number, shape: PageShape = {}): Promise<BoundedEvents> {
    return this.readFromStandby(ref, Math.max(0, beforeSeq - limit), beforeSeq - 1, committedThrough, true, shape);
  }

  /** Events fromSeq..toSeq inclusive, ascending. */
  async range(ref: LogRef, fromSeq: number, toSeq: number, db: Db = this.pool): Promise<StoredEvent[]> {
    return (await this.read(ref, fromSeq, toSeq, db)).events;
  }

  async event(ref: LogRef, seq: number, db: Db = this.pool): Promise<StoredEvent | undefined> {
    return (await this.read(ref, seq, seq, db)).events[0];
  }

  /** The last event of `type` at or before `seq` (default: in the whole log): one index probe per segment. */
  async lastOfType(ref: LogRef, type: string, seq = MAX_SEQ, db: Db = this.pool): Promise<StoredEvent | undefined> {
    return (await this.ofTypes(ref, [type], { fromSeq: 0, toSeq: seq, limit: 1, descending: true }, db))[0];
  }

  /**
   * The string `key` of event `seq`'s data, as much of it as `budget` gives:
   * what the budget gives of its length is taken, then at most that is read
   * (`left`): one request's texts together stay within its budget however many
   * it asks for, and however many read at once (each takes before it reads).
   * `length`: the text's length when the caller read it with the event
   * (StoredEvent.textLength): the text is then one statement, else its length
   * is read first (Postgres reads the row, the process holds a number).
   * Undefined when there is no such event or its `key` is not a string.
   */
  async textWithin(ref: LogRef, seq: number, key: TextKey, budget: TextBudget, length?: number | null, db: Db = this.pool): Promise<BoundedText | undefined> {
    if (length === null) return undefined;
    const l = await this.requireLineage(ref, db);
    const [seg] = segmentsOf(l, seq, seq);
    if (!seg) return undefined;
    const where = `FROM "Event" WHERE "treeId" = $1 AND "sessionId" = $2 AND seq = $3`;
    const at = [seg.treeId, seg.sessionId, seq, key];
    if (length === undefined) {
      const sized = await db.query<{ n: number | null }>(`SELECT length(data->>$4::text) AS n ${where} AND jsonb_typeof(data->$4::text) = 'string'`, at);
      const n = sized.rows[0]?.n;
      if (n === undefined || n === null) return undefined;
      length = n;
    }
    const take = await budget.takeSettled(length);
    if (take === 0) return { text: '', length, truncated: length > 0 };
    const { rows } = await db.query<{ t: string }>(`SELECT left(data->>$4::text, $5::int) AS t ${where}`, [...at, take]);
    return { text: rows[0]?.t ?? '', length, truncated: take < length };
  }

  /** The first event of `type` at or after `seq`. */
  async firstOfType(ref: LogRef, type: string, seq: number, db: Db = this.pool): Promise<StoredEvent | undefined> {
    return (await this.ofTypes(ref, [type], { fromSeq: seq, toSeq: MAX_SEQ, limit: 1 }, db))[0];
  }

  /**
   * Events of the given types within fromSeq..toSeq, at most `limit`, ascending
   * (or from the end when `descending`, returned newest first). Each type and
   * segment is its own index scan with the limit, so a page reads at most
   * types × segments × limit rows, whatever the log's length.
   */
  async ofTypes(ref: LogRef, types: readonly string[], opts: TypesQuery, db: Db = this.pool): Promise<StoredEvent[]> {
    return (await this.typesScan(ref, types, opts, undefined, db)).events;
  }

  /** ofTypes(), cut once the events passed hold `bytes` of data (PAGE_BYTES): what a request may read. */
  ofTypesWithin(ref: LogRef, types: readonly string[], opts: TypesQuery, db: Db = this.pool): Promise<BoundedEvents> {
    return this.typesScan(ref, types, opts, this.pageBytes, db);
  }

  /** `bytes`: the budget (undefined: none); null: read without data (PageShape), which needs none. */
  private async typesScan(ref: LogRef, types: readonly string[], opts: TypesQuery, bytes: number | undefined | null, db: Db): Promise<BoundedEvents> {
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, Math.max(0, opts.fromSeq), Math.min(opts.toSeq, MAX_SEQ));
    if (segments.length === 0 || types.length === 0 || opts.limit <= 0) return { events: [], cut: false };
    const synthetic = opts.synthetic ? ' AND synthetic' : '';
    const dir = opts.descending ? 'DESC' : 'ASC';
    const params: unknown[] = [opts.limit];
    const p = (v: unknown) => `$${params.push(v)}`;
    const columns = opts.withoutTexts
      ? TEXTLESS_COLUMNS
      : bytes === undefined
        ? COLUMNS
        : bytes === null
          ? HEAD_COLUMNS
          : sizedColumns(p(shareOf(bytes, opts.limit)));
    // One ordered index scan per (segment, type), each stopping at the limit.
    // Every bound and type is its own parameter, so the planner sees the real
    // values: behind lateral parameters it guessed 6 rows where there were 700
    // and chose to read them all and sort, one ANALYZE sample in several.
    const scans = segments.flatMap((seg) =>
      types.map(
        (type) =>
          `(SELECT ${columns} FROM "Event" WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND type = ${p(type)}` +
          ` AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)}${synthetic} ORDER BY seq ${dir} LIMIT $1)`,
      ),
    );
    const scan = scans.length === 1 ? scans[0].slice(1, -1) : `SELECT * FROM (${scans.join(' UNION ALL ')}) e ORDER BY seq ${dir} LIMIT $1`;
    const { rows } = await db.query<SizedRow>(scan, params);
    if (bytes === undefined || bytes === null) return { events: rows.map((r) => toStored(l, r)), cut: false };
    return this.withinBytes(l, rows, ROW_LAYOUT, bytes, shareOf(bytes, opts.limit), db);
  }

  /**
   * A turn's totals within fromSeq..toSeq, whatever its length: its steps
   * (step/start events), and over all its model answers their tool calls and
   * the tokens and cost they reported. Summed in Postgres over the (sessionId,
   * type, seq) index, one row out: the process never holds the turn's events
   * (Turn.stepCount, toolCallCount and usage; Turn.steps lists only the first
   * steps of a turn of 10,000 events and more).
   */
  async turnTotals(ref: LogRef, fromSeq: number, toSeq: number, db: Db = this.pool): Promise<TurnTotals> {
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, fromSeq, Math.min(toSeq, MAX_SEQ));
    if (segments.length === 0) return { steps: 0, toolCalls: 0, usage: null };
    const params: unknown[] = [];
    const p = (v: unknown) => `$${params.push(v)}`;
    const scans = segments.map(
      (seg) =>
        `SELECT count(*) FILTER (WHERE type = 'step/start') AS steps, ${ANSWER_SUMS}` +
        ` FROM "Event" e, ${ANSWER_DATA} WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND type IN ('step/start', 'model/message')` +
        ` AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)}`,
    );
    const sums = ['steps', ...ANSWER_SUM_COLUMNS].map((c) => `sum(${c}) AS ${c}`).join(', ');
    const { rows } = await db.query<AnswerSums & { steps: string }>(`SELECT ${sums} FROM (${scans.join(' UNION ALL ')}) t`, params);
    const r = rows[0];
    return { steps: Number(r?.steps ?? 0), toolCalls: Number(r?.calls ?? 0), usage: r ? usageOfSums(r) : null };
  }

  /**
   * Per lineage segment, sums over its turn brackets and model answers from
   * seq `fromSeq` on (for Session.totals, store/session-totals.ts, which
   * starts after its nearest checkpoint): one aggregate over the
   * (sessionId, type, seq) index each; the cost is the turns and answers.
   */
  async segmentTotals(ref: LogRef, fromSeq = 0, db: Db = this.pool): Promise<SegmentTotals[]> {
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, Math.max(0, fromSeq), MAX_SEQ);
    if (segments.length === 0) return [];
    const params: unknown[] = [];
    const p = (v: unknown) => `$${params.push(v)}`;
    const ms = `round(extract(epoch from "createdAt") * 1000)`; // whole ms, as a Date holds them
    const scans = segments.map(
      (seg) =>
        `SELECT count(*) FILTER (WHERE type = 'turn/start') AS starts, count(*) FILTER (WHERE type = 'turn/end') AS ends,` +
        ` count(*) FILTER (WHERE type = 'model/message') AS steps, ${ANSWER_SUMS},` +
        ` coalesce(sum(${ms}) FILTER (WHERE type = 'turn/end'), 0) - coalesce(sum(${ms}) FILTER (WHERE type = 'turn/start'), 0) AS span_ms,` +
        ` max(${ms}) FILTER (WHERE type = 'turn/start') AS last_start_ms, max(seq) AS last_seq,` +
        ` json_agg(json_build_object('seq', seq, 'ms', ${ms})) FILTER (WHERE type = 'turn/end' AND data->>'reason' = 'forked') AS forked,` +
        ` json_agg(json_build_object('seq', seq, 'ms', ${ms})) FILTER (WHERE type = 'turn/end' AND data->>'reason' = 'interrupted' AND synthetic) AS interrupted` +
        ` FROM "Event" e, ${ANSWER_DATA} WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND type IN ('turn/start', 'turn/end', 'model/message')` +
        ` AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)}`,
    );
    return (await db.query<SegmentTotals>(scans.join(' UNION ALL '), params)).rows;
  }

  /**
   * A page of the events that pass `filter` within fromSeq..toSeq (ascending,
   * or newest first when `descending`): of `types` (any when empty), and of an
   * origin: `inherited` (a fork's shared prefix), `own` (the rest) or
   * `synthetic` (written by repair or a fork, not by a runner). Origins are
   * seq bounds or the synthetic rows' own index, types the (sessionId, type,
   * seq) index: a page reads its own rows, never the log between them. Held
   * to PAGE_BYTES, unless read without data (`shape`).
   */
  async filtered(
    ref: LogRef,
    filter: { types: readonly string[]; origin: EventOrigin },
    opts: { fromSeq: number; toSeq: number; limit: number; descending?: boolean },
    shape: PageShape = {},
    db: Db = readingFor(this.pool, shape.statements),
  ): Promise<BoundedEvents> {
    const data = shape.data ?? true;
    const budget = this.bytesOf(shape);
    const l = await this.requireLineage(ref, db);
    let { fromSeq, toSeq } = opts;
    if (filter.origin === 'inherited') toSeq = Math.min(toSeq, l.inheritedEventCount - 1);
    if (filter.origin === 'own') fromSeq = Math.max(fromSeq, l.inheritedEventCount);
    const bounds = { ...opts, fromSeq: Math.max(0, fromSeq), toSeq: Math.min(toSeq, MAX_SEQ) };
    if (bounds.toSeq < bounds.fromSeq || opts.limit <= 0) return { events: [], cut: false };
    if (filter.types.length) return this.typesScan(l, filter.types, { ...bounds, synthetic: filter.origin === 'synthetic' }, data ? budget : null, db);
    if (filter.origin !== 'synthetic') {
      const from = opts.descending ? Math.max(bounds.fromSeq, bounds.toSeq - opts.limit + 1) : bounds.fromSeq;
      const to = Math.min(bounds.toSeq, from + opts.limit - 1);
      const read = data ? await this.read(l, from, to, db, { bytes: budget, fromEnd: opts.descending ?? false }) : await this.readHeads(l, from, to, db);
      if (opts.descending) read.events.reverse();
      return read;
    }
    // Synthetic rows of each segment, from their partial index (Event_synthetic_idx).
    const segments = segmentsOf(l, bounds.fromSeq, bounds.toSeq);
    if (segments.length === 0) return { events: [], cut: false };
    const dir = opts.descending ? 'DESC' : 'ASC';
    const params: unknown[] = [opts.limit];
    const p = (v: unknown) => `$${params.push(v)}`;
    const columns = data ? sizedColumns(p(shareOf(budget, opts.limit))) : HEAD_COLUMNS;
    const scans = segments.map(
      (seg) =>
        `(SELECT ${columns} FROM "Event" WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND synthetic AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)} ORDER BY seq ${dir} LIMIT $1)`,
    );
    const { rows } = await db.query<SizedRow>(`SELECT * FROM (${scans.join(' UNION ALL ')}) e ORDER BY seq ${dir} LIMIT $1`, params);
    if (!data) return { events: rows.map((r) => toStored(l, r)), cut: false };
    return this.withinBytes(l, rows, ROW_LAYOUT, budget, shareOf(budget, opts.limit), db);
  }

  /** What a page read with `shape` may hold of event data: its share, within PAGE_BYTES (at least a byte: the first event always comes). */
  private bytesOf(shape: PageShape): number {
    return Math.max(1, Math.min(shape.bytes ?? this.pageBytes, this.pageBytes));
  }

  /**
   * The `inbox/add` that queued `inputId` at or before `toSeq` (the newest, were
   * an id ever queued twice), or undefined. Per segment one scan of the
   * (sessionId, type, seq) index over the session's inbox/add rows, the input id
   * compared in SQL: the cost is the session's inputs, never its log.
   */
  async inboxAddOf(ref: LogRef, inputId: string, toSeq = MAX_SEQ, shape: InboxAddShape = {}, db: Db = this.pool): Promise<StoredEvent | undefined> {
    const l = await this.requireLineage(ref, db);
    const columns = shape.withoutTexts ? TEXTLESS_COLUMNS : (shape.data ?? true) ? COLUMNS : HEAD_COLUMNS;
    const row = await newestAcrossSegments<Row>(
      l,
      toSeq,
      inputId,
      db,
      (seg, p) =>
        `SELECT ${columns} FROM "Event" WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND type = 'inbox/add'` +
        ` AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)} AND data->>'inputId' = $1`,
    );
    return row && toStored(l, row);
  }

  /**
   * The `inbox/add`s that queued `inputIds` at or before `toSeq` (the newest of
   * each), newest first, cut once their data passes `bytes` (at most
   * PAGE_BYTES; the first always comes): an input can be megabytes, so a reader
   * of many turns' inputs holds a budget of them, not all. One statement: per
   * segment a scan of the (sessionId, type, seq) index over the session's
   * inputs, each row's size known before its data is read.
   */
  async inboxAddsWithin(ref: LogRef, inputIds: readonly string[], toSeq: number, bytes = this.pageBytes, db: Db = this.pool): Promise<BoundedEvents> {
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, 0, Math.min(toSeq, MAX_SEQ));
    if (segments.length === 0 || inputIds.length === 0) return { events: [], cut: false, bytes: 0 };
    const budget = Math.min(bytes, this.pageBytes);
    const share = shareOf(budget, inputIds.length);
    const params: unknown[] = [[...new Set(inputIds)], share];
    const p = (v: unknown) => `$${params.push(v)}`;
    const scans = segments.map(
      (seg) =>
        `SELECT ${sizedColumns('$2')}, data->>'inputId' AS input_id FROM "Event" WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)}` +
        ` AND type = 'inbox/add' AND seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)} AND data->>'inputId' = ANY($1::text[])`,
    );
    const { rows } = await db.query<SizedRow & { input_id: string }>(`SELECT * FROM (${scans.join(' UNION ALL ')}) e ORDER BY seq DESC`, params);
    const seen = new Set<string>();
    const newest = rows.filter((r) => !seen.has(r.input_id) && seen.add(r.input_id));
    return this.withinBytes(l, newest, ROW_LAYOUT, budget, share, db);
  }

  /**
   * The workspace value of `key` as of `toSeq` (default: the end of the log),
   * inherited writes included, or undefined (docs/contract.md#log cost: one index probe
   * per lineage segment, whatever the log's length). See `workspaceWrites`.
   */
  async workspaceEntry(ref: LogRef, key: string, toSeq = MAX_SEQ, db: Db = this.pool): Promise<WorkspaceEntry | undefined> {
    const l = await this.requireLineage(ref, db);
    const row = await newestAcrossSegments<{ seq: number; data: { key: string; value: string } }>(
      l,
      toSeq,
      key,
      db,
      (seg, p) => `SELECT w.seq, w.data FROM "Event" w WHERE ${workspaceWrites(seg, p)} AND w.data->>'key' = $1`,
    );
    return row && { key: row.data.key, value: row.data.value, seq: row.seq };
  }

  /**
   * The whole workspace at the end of the log: the latest write of each key,
   * inherited writes included, in key order, at most `limit` keys (`truncated`
   * when there are more). Per segment a skip scan of the workspace index (one
   * probe per distinct key, then one for its latest write): the cost is the
   * keys, never the log or the number of writes.
   */
  async workspace(ref: LogRef, limit: number, db: Db = this.pool): Promise<{ entries: WorkspaceEntry[]; truncated: boolean }> {
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, 0, MAX_SEQ);
    // Keys are listed through the whole stored segment even when reading a
    // snapshot (`l.endSeq`): a tight upper bound on the log's own segment led
    // the planner to sort that segment's writes instead of skipping from key to
    // key. A key written only after the snapshot has no write within it, so its
    // lookup below finds nothing and it drops out.
    const stored = segmentsOf({ ...l, endSeq: undefined }, 0, MAX_SEQ);
    const params: unknown[] = [limit + 1];
    const p = (v: unknown) => `$${params.push(v)}`;
    const ctes: string[] = [];
    const selects: string[] = [];
    segments.forEach((seg, i) => {
      // The segment's bounds once, reused by the key probes and the lookups.
      const [tree, sid, from, to, keysTo] = [p(seg.treeId), p(seg.sessionId), p(seg.fromSeq), p(seg.toSeq), p(stored[i].toSeq)];
      const bounds = { treeId: tree, sessionId: sid, fromSeq: from, toSeq: to };
      const keyAfter = (after: string) =>
        `SELECT w.data->>'key' FROM "Event" w WHERE w."treeId" = ${tree} AND w."sessionId" = ${sid} AND w.type = '${WORKSPACE_WRITE}'` +
        ` AND w.seq BETWEEN ${from} AND ${keysTo}::int - 1${after} ORDER BY w.data->>'key' LIMIT 1`;
      ctes.push(`k${i}(key) AS ((${keyAfter('')}) UNION ALL SELECT (${keyAfter(` AND w.data->>'key' > k${i}.key`)}) FROM k${i} WHERE k${i}.key IS NOT NULL)`);
      // The limit counts keys found, not keys listed (one listed after the snapshot finds none).
      selects.push(
        `(SELECT w.seq, w.data FROM (SELECT key FROM k${i} WHERE key IS NOT NULL) k CROSS JOIN LATERAL ` +
          `(SELECT w.seq, w.data FROM "Event" w WHERE ${workspaceWrites(bounds, (v) => String(v))} AND w.data->>'key' = k.key ORDER BY w.seq DESC LIMIT 1) w LIMIT $1)`,
      );
    });
    if (segments.length === 0) return { entries: [], truncated: false };
    const { rows } = await db.query<{ seq: number; data: { key: string; value: string } }>(
      `WITH RECURSIVE ${ctes.join(', ')} ${selects.join(' UNION ALL ')}`,
      params,
    );
    // A later segment's write of a key replaces an earlier one's.
    const latest = new Map<string, WorkspaceEntry>();
    for (const r of rows) {
      const seen = latest.get(r.data.key);
      if (!seen || seen.seq < r.seq) latest.set(r.data.key, { key: r.data.key, value: r.data.value, seq: r.seq });
    }
    const entries = [...latest.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    return { entries: entries.slice(0, limit), truncated: entries.length > limit };
  }

  /**
   * The file change sets in effect as of `toSeq` (default: the end of the
   * log), inherited ones included, ascending: what core/file-tree.ts
   * `foldFileTree` folds into the tree of that moment. A change set is stored
   * right before its call's `tool/result`, in the same append, and takes effect
   * with it, like a workspace write (`workspaceWrites`): a cut at the change
   * set's own seq leaves it out. Scans of the (sessionId, type, seq) index per
   * lineage segment: the cost is the file-changing calls, never the log.
   *
   * A page at a time: at most `pageSize` change sets and at most `pageBytes` of
   * their data (or one larger change set), so a reader of a whole history (an
   * import's check, an export's contents, a tree's first read) holds one page
   * of it, never the history. Each page's sizes are read first, without the
   * data, then the data of those that fit. `fromSeq`: only change sets at or
   * after it (those after a tree checkpoint, store/file-tree-checkpoints.ts).
   */
  async *fileChangeSetPages(
    ref: LogRef,
    toSeq = MAX_SEQ,
    page: ChangeSetPage = CHANGE_SET_PAGE,
    db: Db = this.pool,
    fromSeq = 0,
  ): AsyncGenerator<Array<{ seq: number; data: FilesChangeData }>> {
    for (let from = fromSeq; ;) {
      const sizes = await this.changeSetScan<{ seq: number; b: number }>(ref, toSeq, 'ASC', page.pageSize, db, from, `${DATA_BYTES} AS b`);
      if (sizes.length === 0) return;
      let n = 1;
      for (let bytes = Number(sizes[0].b); n < sizes.length && bytes + Number(sizes[n].b) <= page.pageBytes; n++) bytes += Number(sizes[n].b);
      // The same first n change sets from `from` (a log only grows past its end).
      yield await this.changeSetScan(ref, toSeq, 'ASC', n, db, from);
      if (n === sizes.length && sizes.length < page.pageSize) return;
      from = sizes[n - 1].seq + 1;
    }
  }

  /** Where seqs lo..hi of the log are stored (a read as of a snapshot stops at its end). */
  async segments(ref: LogRef, lo: number, hi: number, db: Db = this.pool): Promise<Segment[]> {
    return segmentsOf(await this.requireLineage(ref, db), Math.max(0, lo), Math.min(hi, MAX_SEQ));
  }

  /** The seq of the last file change set in effect (-1: none): one index probe per segment (the agent's workspace checks it is current). */
  async lastFileChangeSeq(ref: LogRef, db: Db = this.pool): Promise<number> {
    return (await this.changeSetScan(ref, MAX_SEQ, 'DESC', 1, db))[0]?.seq ?? -1;
  }

  private async changeSetScan<R extends { seq: number } = { seq: number; data: FilesChangeData }>(
    ref: LogRef,
    toSeq: number,
    dir: 'ASC' | 'DESC',
    limit: number | undefined,
    db: Db,
    fromSeq = 0,
    columns = 'c.data',
  ): Promise<R[]> {
    const segments = await this.segments(ref, fromSeq, toSeq, db);
    if (segments.length === 0) return [];
    const params: unknown[] = [];
    const p = (v: unknown) => `$${params.push(v)}`;
    const limited = limit === undefined ? '' : ` LIMIT ${p(limit)}`;
    const scans = segments.map(
      (seg) =>
        `(SELECT c.seq, ${columns} FROM "Event" c WHERE c."treeId" = ${p(seg.treeId)} AND c."sessionId" = ${p(seg.sessionId)} AND c.type = '${FILES_CHANGE}'` +
        ` AND jsonb_typeof(c.data->'changes') = 'array'` +
        ` AND c.seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)}::int - 1` +
        // The event right after it is its result: one probe of the primary key per change set (a condition on r.type
        // here lets the planner scan every result of the session instead, when its statistics think them few).
        ` AND (SELECT r.type = 'tool/result' AND r.data->>'callId' = c.data->>'callId' FROM "Event" r WHERE r."treeId" = c."treeId" AND r."sessionId" = c."sessionId" AND r.seq = c.seq + 1)` +
        ` ORDER BY c.seq ${dir}${limited})`,
    );
    const { rows } = await db.query<R>(`SELECT * FROM (${scans.join(' UNION ALL ')}) c ORDER BY seq ${dir}${limited}`, params);
    return rows;
  }

  /** Every event of the given types, ascending, a page at a time. */
  async *streamOfTypes(ref: LogRef, types: readonly string[], pageSize = 1000, db: Db = this.pool): AsyncGenerator<StoredEvent> {
    const lineage = await this.requireLineage(ref, db);
    for (let from = 0; ;) {
      const page = await this.ofTypes(lineage, types, { fromSeq: from, toSeq: MAX_SEQ, limit: pageSize }, db);
      yield* page;
      if (page.length < pageSize) return;
      from = page[page.length - 1].seq + 1;
    }
  }

  /**
   * The inputs waiting in the inbox right after `atSeq` (default: the end),
   * oldest first, given how many there are (Session.pendingInputCount, or the
   * count stored with the event at `atSeq`). Reads inbox events backwards until
   * it has found them all: the cost is the inbox activity since the oldest
   * waiting input, not the log.
   */
  /** `withoutTexts`: each input's text left empty, its length given (a reader that reads them within a budget: textWithin). */
  async pendingInputs(
    ref: LogRef,
    count: number,
    db: Db = this.pool,
    atSeq = MAX_SEQ,
    withoutTexts = false,
  ): Promise<Array<PendingInput & Pick<StoredEvent, 'textLength'>>> {
    if (count <= 0) return [];
    const lineage = await this.requireLineage(ref, db);
    const removed = new Set<string>();
    const found: Array<PendingInput & Pick<StoredEvent, 'textLength'>> = [];
    // The first page usually holds them all; pages grow when inputs wait long.
    for (let to = atSeq, pageSize = count + 16; found.length < count; pageSize = Math.min(pageSize * 4, 1000)) {
      const page = await this.ofTypes(lineage, ['inbox/add', 'inbox/remove'], { fromSeq: 0, toSeq: to, limit: pageSize, descending: true, withoutTexts }, db);
      for (const e of page) {
        const ev = asCoreEvent(e);
        if (ev.type === 'inbox/remove') removed.add(ev.data.inputId);
        else if (ev.type === 'inbox/add' && !removed.has(ev.data.inputId))
          found.push({ ...pendingInputOf(ev.data, e.seq), ...(withoutTexts ? { textLength: e.textLength } : {}) });
      }
      if (page.length < pageSize) break;
      to = page[page.length - 1].seq - 1;
    }
    return found.reverse();
  }

  /**
   * What repair needs to close whatever is open at `seq` (LogState.openTail;
   * docs/contract.md#exact-fork cost): the last `turn/start` at or before it
   * and, when that turn is still open there, the fold of the events from it
   * through `seq`; a closed last turn reads nothing more, however many events
   * follow it. The open turn is folded page by page, each of at most
   * STREAM_PAGE_BYTES of data plus one event: a turn of many large events (a
   * recording's, a runner's batches) is never held whole, only the open step's
   * calls are kept (docs/operations.md "Memory and time").
   */
  async openTailFolded(ref: LogRef, seq: number, db: Db = this.pool): Promise<{ turnStart?: StoredEvent; open?: OpenTail }> {
    const { turnStart, openTurn } = await this.openTurnFolded(ref, seq, db);
    return { turnStart, open: openTurn?.openTail() };
  }

  /** The last turn/start at or before `seq` and, when its turn is still open there, the fold of its events through `seq` (openTailFolded's pages). */
  async openTurnFolded(ref: LogRef, seq: number, db: Db = this.pool): Promise<{ turnStart?: StoredEvent; openTurn?: LogState }> {
    const l = await this.requireLineage(ref, db);
    const { turnStart, open } = await this.lastTurnAt(l, seq, db);
    if (!open) return { turnStart };
    const openTurn = new LogState();
    for (let after = turnStart!.seq - 1; after < seq;) {
      const { events } = await this.pageWithin(l, after, Math.min(1000, seq - after), db, STREAM_PAGE_BYTES);
      if (events.length === 0) break;
      openTurn.applyAll(events);
      after = events[events.length - 1].seq;
    }
    return { turnStart, openTurn };
  }

  /** The last turn/start at or before `seq`, and whether its turn is still open there (two index probes). */
  private async lastTurnAt(l: Lineage, seq: number, db: Db): Promise<{ turnStart?: StoredEvent; open: boolean }> {
    const turnStart = await this.lastOfType(l, 'turn/start', seq, db);
    if (!turnStart) return { open: false };
    const turnEnd = await this.lastOfType(l, 'turn/end', seq, db);
    const closed = turnEnd && turnEnd.seq > turnStart.seq && dataOf(turnEnd, 'turn/end')?.turn === dataOf(turnStart, 'turn/start')?.turn;
    return { turnStart, open: !closed };
  }

  /** The session's pendingInputCount right after `seq` (stored with each event: no count over the prefix). */
  async pendingInputCountAt(ref: LogRef, seq: number, db: Db = this.pool): Promise<number> {
    if (seq < 0) return 0;
    const l = await this.requireLineage(ref, db);
    const [segment] = segmentsOf(l, seq, seq);
    if (!segment) throw new Error(`event ${seq} of session ${l.sessionId} lies past the snapshot read`);
    const { rows } = await db.query<{ n: number }>('SELECT "pendingInputCount" AS n FROM "Event" WHERE "treeId" = $1 AND "sessionId" = $2 AND seq = $3', [
      segment.treeId,
      segment.sessionId,
      seq,
    ]);
    if (!rows[0]) throw new Error(`event ${seq} of session ${l.sessionId} is missing`);
    return rows[0].n;
  }

  /** The log event by event, from afterSeq (exclusive) to endSeq (exclusive), by pages of STREAM_PAGE_BYTES: never more than two pages in memory. */
  async *stream(ref: LogRef, opts: { afterSeq?: number; endSeq?: number; pageSize?: number; db?: Db } = {}): AsyncGenerator<StoredEvent> {
    for await (const page of this.pages(ref, { pageBytes: STREAM_PAGE_BYTES, ...opts })) yield* page;
  }

  /**
   * The log page by page, from afterSeq (exclusive) to endSeq (exclusive). The
   * next page is read while the caller works on this one: replaying a
   * 1,000,000-event log overlaps Postgres' reads with the caller's folding
   * (the agent's cold replay of 1M events, by pages and reading ahead: 3.1 →
   * 2.3–2.6 s; reading three pages ahead was no faster than one, 3.1 s: the
   * pages are parsed on this thread too).
   */
  async *pages(ref: LogRef, opts: { afterSeq?: number; endSeq?: number; pageSize?: number; pageBytes?: number; db?: Db } = {}): AsyncGenerator<StoredEvent[]> {
    const pageSize = opts.pageSize ?? 1000;
    const end = opts.endSeq ?? Infinity;
    const db = opts.db ?? this.pool;
    const lineage = await this.requireLineage(ref, db);
    const readAfter = (after: number) => {
      const limit = Math.min(pageSize, end - after - 1);
      const read = this.pageWithin(lineage, after, limit, db, opts.pageBytes).then(({ events, cut }) => ({
        page: events,
        cut,
        last: !cut && events.length < limit,
      }));
      read.catch(() => {}); // a caller that stops early never awaits the read ahead
      return read;
    };
    if ((opts.afterSeq ?? -1) + 1 >= end) return;
    let next = readAfter(opts.afterSeq ?? -1);
    for (;;) {
      const { page, cut, last } = await next;
      const after = page.at(-1)?.seq ?? Infinity;
      const more = !last && after + 1 < end;
      // A page cut by its bytes holds large events: the next is read once the caller is done with this one, never two such pages at once.
      const ahead = more && !cut;
      if (ahead) next = readAfter(after);
      if (page.length) yield page;
      if (!more) return;
      if (!ahead) next = readAfter(after);
    }
  }

  /** The session's fork tree (cached): what a statement on its rows names. SESSION_NOT_FOUND when there is none. */
  async treeOf(ref: LogRef, db: Db = this.pool): Promise<string> {
    if (typeof ref !== 'string') return ref.treeId;
    return this.lineages.get(ref)?.treeId ?? this.trees.require(ref, db);
  }

  private async requireLineage(ref: LogRef, db: Db = this.pool): Promise<Lineage> {
    const l = await this.lineage(ref, db);
    if (!l) throw sessionNotFound(ref as string);
    return l;
  }

  private async readFromStandby(
    ref: LogRef,
    lo: number,
    hi: number,
    committedThrough: number | undefined,
    fromEnd: boolean,
    shape: PageShape,
  ): Promise<BoundedEvents> {
    const bound = { bytes: this.bytesOf(shape), fromEnd };
    const data = shape.data ?? true;
    const primary = readingFor(this.pool, shape.statements);
    const standby = hi >= lo && hi >= 0 ? this.standbys?.pick() : undefined;
    if (!standby) {
      // Every standby down: counted, or the metric would show the reads stopping.
      if (this.standbys && hi >= lo && hi >= 0) this.onStandbyRead?.('primary', 'events');
      return this.readShaped(data, ref, lo, hi, primary, bound);
    }
    const l = await this.requireLineage(ref, primary); // from the primary (cached): a new fork may not be on the standby yet
    let read: BoundedEvents;
    try {
      read = await this.readShaped(data, l, lo, hi, readingFor(standby.pool, shape.statements), bound);
    } catch (err) {
      if (err instanceof StatementAbandonedError || err instanceof StatementTimeoutError) throw err; // the request's bound, not the standby's failure
      standby.failed(err);
      this.onStandbyRead?.('primary', 'events');
      return this.readShaped(data, l, lo, hi, primary, bound);
    }
    const rows = read.events;
    const known = committedThrough === undefined ? hi : Math.min(hi, committedThrough);
    if (fromEnd) {
      // The newest of the range are the page: the standby must have them.
      if ((rows.at(-1)?.seq ?? -1) >= known) {
        this.onStandbyRead?.('standby', 'events');
        return read;
      }
      this.onStandbyRead?.('primary', 'events');
      return this.readShaped(data, l, lo, hi, primary, bound);
    }
    let have = 0;
    const first = Math.max(0, lo);
    while (have < rows.length && rows[have].seq === first + have) have++;
    const through = first + have - 1;
    // A cut answer ends where the budget stopped it, not where the standby's log does.
    if ((read.cut && have === rows.length) || through >= known) {
      this.onStandbyRead?.('standby', 'events');
      return have === rows.length ? read : { events: rows.slice(0, have), cut: read.cut };
    }
    // The standby is behind what the caller knows of: the rest from the primary
    // (under its own budget: such a page holds at most twice PAGE_BYTES).
    this.onStandbyRead?.(have ? 'both' : 'primary', 'events');
    const rest = await this.readShaped(data, l, through + 1, hi, primary, bound);
    return { events: [...rows.slice(0, have), ...rest.events], cut: rest.cut };
  }

  /** read() under `bound`, or readHeads() when the page reads no data (PageShape). */
  private readShaped(data: boolean, ref: LogRef, lo: number, hi: number, db: Db, bound: { bytes: number; fromEnd: boolean }): Promise<BoundedEvents> {
    return data ? this.read(ref, lo, hi, db, bound) : this.readHeads(ref, lo, hi, db);
  }

  /**
   * Seqs lo..hi (hi may lie past the end): one statement, whatever the number
   * of segments. With `bound`, cut once the events passed hold `bound.bytes`
   * (from lo, or from hi when `fromEnd`; the first event always comes).
   */
  private async read(ref: LogRef, lo: number, hi: number, db: Db, bound?: { bytes: number; fromEnd: boolean }): Promise<BoundedEvents> {
    if (hi < lo || hi < 0) return { events: [], cut: false };
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, Math.max(0, lo), Math.min(hi, MAX_SEQ));
    if (segments.length === 0) return { events: [], cut: false };
    if (!bound) {
      const { rows } =
        segments.length === 1
          ? await db.query<Tuple>(asTuples(this.rangeStatement([segments[0].sessionId, segments[0].fromSeq, segments[0].toSeq, segments[0].treeId])))
          : // One index range scan per segment, each with its own bounds as parameters
            // (the planner sees real values), in one statement.
            await db.query<Tuple>(asTuples(queryOf(...rangeUnion(segments, COLUMNS, 'ASC'))));
      return { events: rows.map((r) => tupleToStored(l, r)), cut: false };
    }
    const dir = bound.fromEnd ? 'DESC' : 'ASC';
    const share = shareOf(bound.bytes, hi - lo + 1);
    const [seg] = segments;
    const { rows } =
      segments.length === 1
        ? await db.query<Tuple>(asTuples(this.rangeWithinStatement[dir]([seg.sessionId, seg.fromSeq, seg.toSeq, seg.treeId, share])))
        : await db.query<Tuple>(asTuples(queryOf(...rangeUnion(segments, sizedColumns('$1'), dir, [share]))));
    const read = await this.withinBytes(l, rows, TUPLE_LAYOUT, bound.bytes, share, db);
    if (bound.fromEnd) read.events.reverse();
    return read;
  }

  /** Seqs lo..hi as read(), without their data (PageShape): no budget, one statement. */
  private async readHeads(ref: LogRef, lo: number, hi: number, db: Db): Promise<BoundedEvents> {
    if (hi < lo || hi < 0) return { events: [], cut: false };
    const l = await this.requireLineage(ref, db);
    const segments = segmentsOf(l, Math.max(0, lo), Math.min(hi, MAX_SEQ));
    if (segments.length === 0) return { events: [], cut: false };
    const [seg] = segments;
    const { rows } =
      segments.length === 1
        ? await db.query<Row>(this.rangeHeadsStatement([seg.sessionId, seg.fromSeq, seg.toSeq, seg.treeId]))
        : await db.query<Row>(...rangeUnion(segments, HEAD_COLUMNS, 'ASC'));
    return { events: rows.map((r) => toStored(l, r)), cut: false };
  }

  /**
   * `rows` (in the order read) up to where their sizes pass `bytes` (the first
   * always comes), with the data of those over `share` (left out of the
   * read) read now.
   */
  private async withinBytes<R>(l: Lineage, rows: R[], layout: SizedLayout<R>, bytes: number, share: number, db: Db): Promise<BoundedEvents> {
    let kept = 0;
    let sum = 0;
    const large: number[] = [];
    while (kept < rows.length && (kept === 0 || sum < bytes)) {
      const b = layout.bytes(rows[kept]);
      if (b > share) large.push(layout.seq(rows[kept]));
      sum += b;
      kept++;
    }
    const events: StoredEvent[] = new Array(kept);
    for (let i = 0; i < kept; i++) events[i] = layout.event(l, rows[i]);
    if (large.length) {
      const data = new Map((await this.dataOf(l, large, db)).map((r) => [r.seq, r.data]));
      for (const e of events) if (data.has(e.seq)) e.data = data.get(e.seq);
    }
    return { events, cut: kept < rows.length, bytes: sum };
  }

  /** The data of events `seqs` of a log: one statement, whatever the segments they lie in. */
  private async dataOf(l: Lineage, seqs: readonly number[], db: Db): Promise<Array<{ seq: number; data: unknown }>> {
    const params: unknown[] = [];
    const p = (v: unknown) => `$${params.push(v)}`;
    const scans = segmentsOf(l, Math.min(...seqs), Math.max(...seqs)).flatMap((seg) => {
      const own = seqs.filter((q) => q >= seg.fromSeq && q <= seg.toSeq);
      return own.length
        ? [`SELECT seq, data FROM "Event" WHERE "treeId" = ${p(seg.treeId)} AND "sessionId" = ${p(seg.sessionId)} AND seq = ANY(${p(own)}::int[])`]
        : [];
    });
    return (await db.query<{ seq: number; data: unknown }>(scans.join(' UNION ALL '), params)).rows;
  }

  /**
   * Stored events of a type across every session, each row once where it is
   * stored (not through any session's log, so inherited ranges do not apply),
   * in (session, seq) order after `after`: what a check of stored data over
   * the whole database reads (the start-up check of change sets).
   */
  async storedOfType(
    type: string,
    after: { sessionId: string; seq: number },
    limit: number,
  ): Promise<Array<{ sessionId: string; seq: number; data: unknown }>> {
    const { rows } = await this.pool.query<{ sessionId: string; seq: number; data: unknown }>(
      `SELECT "sessionId", seq, data FROM "Event" WHERE type = $1 AND ("sessionId", seq) > ($2, $3) ORDER BY "sessionId", seq LIMIT $4`,
      [type, after.sessionId, after.seq, limit],
    );
    return rows;
  }
}

/** The event type a workspace write is stored as (tools.ts note_write; the partial index Event_workspace_idx). */
export const WORKSPACE_WRITE = 'plugin/workspace/write';

/** One key of a session's workspace: its value and the seq of the write that set it. */
export interface WorkspaceEntry {
  key: string;
  value: string;
  seq: number;
}

/**
 * The newest row (by seq) that `scan` finds in any segment of the lineage
 * through `toSeq`, in one statement: per segment one probe, newest first.
 * `scan` is a SELECT of a segment's rows with a `seq` column; `p` binds a
 * parameter, `$1` is `first`.
 */
async function newestAcrossSegments<R extends { seq: number }>(
  l: Lineage,
  toSeq: number,
  first: unknown,
  db: Db,
  scan: (seg: Segment, p: (v: unknown) => string) => string,
): Promise<R | undefined> {
  const segments = segmentsOf(l, 0, Math.min(toSeq, MAX_SEQ));
  if (segments.length === 0) return undefined;
  const params: unknown[] = [first];
  const p = (v: unknown) => `$${params.push(v)}`;
  const scans = segments.map((seg) => `(${scan(seg, p)} ORDER BY seq DESC LIMIT 1)`);
  const { rows } = await db.query<R>(`SELECT * FROM (${scans.join(' UNION ALL ')}) e ORDER BY seq DESC LIMIT 1`, params);
  return rows[0];
}

/**
 * The SQL condition (on alias `w`) for the workspace writes in effect within a
 * segment. A write is stored right before its `tool/result`, in the same
 * append, and takes effect with that result: it counts only when the event
 * after it, in the same stored session and inside the segment, is an `ok`
 * result of its call. So a cut between the two (a fork at the write's seq)
 * leaves the write out, as it leaves out the result; repair's synthetic
 * results never carry a write. The type is a literal: the partial index
 * matches it.
 */
function workspaceWrites(seg: { treeId: unknown; sessionId: unknown; fromSeq: unknown; toSeq: unknown }, p: (v: unknown) => string): string {
  return (
    `w."treeId" = ${p(seg.treeId)} AND w."sessionId" = ${p(seg.sessionId)} AND w.type = '${WORKSPACE_WRITE}' AND w.seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)}::int - 1` +
    ` AND EXISTS (SELECT 1 FROM "Event" r WHERE r."treeId" = w."treeId" AND r."sessionId" = w."sessionId" AND r.seq = w.seq + 1 AND r.type = 'tool/result'` +
    ` AND r.data->>'status' = 'ok' AND r.data->>'callId' = w.data->>'callId')`
  );
}

function toStored(l: Lineage, r: Row): StoredEvent {
  const e = storedEvent(l, r.seq, r.type, r.data, r.synthetic, r.createdAt);
  if (r.tl !== undefined) e.textLength = r.tl;
  return e;
}

function tupleToStored(l: Lineage, r: Tuple): StoredEvent {
  return storedEvent(l, r[0], r[1], r[2], r[3], r[4]);
}

function storedEvent(l: Lineage, seq: number, type: string, data: unknown, synthetic: boolean, createdAt: Date): StoredEvent {
  return { id: eventId(l.sessionId, seq), sessionId: l.sessionId, seq, type, data, inherited: seq < l.inheritedEventCount, synthetic, createdAt };
}
