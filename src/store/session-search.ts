// Full-text search over a tenant's sessions: user inputs (inbox/add
// text), model messages (model/message text) and session titles, title
// matches first, each part newest first, with ts_headline snippets; and
// search within one session's log (its inherited prefix included), in seq order.
//
// Migration 20261204000000_session_search keeps each searched event's tsvector
// (Event."searchVector") and GIN-indexes it and forks' inheritedRanges (a
// partial index: the `<> '[]'` below lets the planner use it), and migration
// 20261209090000_session_tree_id_index a session's children by the md5 of
// their title (a title's descendants are read through it: the `md5(…) =`
// below, so a root with thousands of differently titled forks reads only
// those that kept its title), and migration 20261212020000_session_title_search
// the titles, in "SessionTitle" (a copy a trigger keeps, so that appends, which
// update the session row, do not index its title again; the title expression
// below must stay exactly that of its index). Events are
// matched where they are stored: a fork's inherited prefix stays in the
// ancestor that wrote it (store/lineage.ts), so an inherited event matches
// once, at that session, and the hit counts the descendants sharing it (their
// inheritedRanges cover its seq), up to DESCENDANTS_COUNTED. A forked title
// equal to its parent's is the parent's, likewise. Descendants, snippets and
// title seqs are computed for the hits of one page only.
//
// Cost: the order is recency, not rank, so that a page never ranks
// every match, and a page reads a bounded number of rows whatever the corpus
// and whatever other tenants wrote last (candidates(), below). Migration
// 20261220070001_event_tenant_recency indexes the searchable events by (tenant,
// createdAt, sessionId, seq) (Event.tenant, the session's): a common word's
// page walks its tenant's rows newest first and stops after its page, so
// another tenant's fresh burst is not in its way; a rare word's few matches
// come from the GIN index and are sorted; the planner picks by the words'
// frequency, so nothing is prepared. Titles likewise, on Session (tenant, createdAt).
import type pg from 'pg';
import { MAX_SEQ, type Db, type OnStandbyRead, type SessionLog } from './session-log.ts';
import { readCaughtUpOr, type ReadReplicas } from '../db/read-replicas.ts';
import { readingFor, type StatementScope } from '../db/statement-deadlines.ts';
import { segmentsOf } from './lineage.ts';

/** The text search configuration of the indexes (English stemming and stop words). */
const CONFIG = `'english'::regconfig`;
/** Characters of a text that are indexed: to_tsvector fails above 1 MB of lexemes, and an append must never fail on its text. */
export const INDEXED_CHARS = 100_000;
/** Event."searchVector": generated from the same expression for inbox/add and model/message, null otherwise. */
const EVENT_VECTOR = `e."searchVector"`;
/** The types that have a vector, as the predicate of Event_text_recency_idx spells them (the planner matches it literally). */
const SEARCHED_TYPES = `e.type IN ('inbox/add', 'model/message')`;
const titleVector = (alias: string) => `to_tsvector(${CONFIG}, left(${alias}.title, ${INDEXED_CHARS}))`;
const TITLE_VECTOR = titleVector('s');
/** A fork whose title is its parent's is not a title hit: a correlated lookup, made for matches only (an EXISTS is planned as a hash of every session). */
const TITLE_NOT_PARENTS = `(SELECT p.title FROM "Session" p WHERE p.id = s."parentId") IS DISTINCT FROM s.title`;
/** The tenant's rows a page reads in list order before it asks the text index (events; titles, whose vectors are computed as they are read). */
export const EVENT_WINDOW = 2000;
export const TITLE_WINDOW = 500;
/**
 * Past its window, a page reads at most a window's worth of older matches from
 * the text index (any tenant's: the index has no tenant), and past that at most
 * WALK_WINDOWS windows of rows in list order; a page still short then ends
 * early, its cursor at the last row read (SearchPage.resumeAfter).
 */
export const WALK_WINDOWS = 30;
/** Descendants sharing a hit are counted up to this many (a count is a read per descendant). */
export const DESCENDANTS_COUNTED = 100;

/** Marks around the matched words of a snippet (the rest of it is plain text, not HTML). */
export const SNIPPET_START = '⟦';
export const SNIPPET_STOP = '⟧';
const HEADLINE = `StartSel=${SNIPPET_START}, StopSel=${SNIPPET_STOP}, MaxWords=30, MinWords=12, ShortWord=0, MaxFragments=2, FragmentDelimiter=" … "`;

export type SearchHitKind = 'TITLE' | 'INPUT' | 'MESSAGE';

/**
 * A position in the list: title hits first (newest session first, then by id),
 * then events (newest first, then by session id and seq, descending).
 */
export interface SearchKey {
  title: boolean;
  /** The session's createdAt for a title hit, the event's for an event hit (milliseconds). */
  at: number;
  sessionId: string;
  /** -1 for a title hit. */
  seq: number;
}

export interface SearchHit {
  kind: SearchHitKind;
  sessionId: string;
  /** The matching event's seq; for a title, the seq of the session/title event that set it (0 when none did, e.g. an import's header). */
  seq: number;
  rank: number;
  /** Text around the match, matched words between SNIPPET_START and SNIPPET_STOP. */
  snippet: string;
  /** Sessions forked from this one (at any depth) that share the matched event, or the title, counted up to DESCENDANTS_COUNTED. */
  descendants: number;
  key: SearchKey;
}

/** A match within one session's log. */
export interface SessionSearchHit {
  seq: number;
  kind: Exclude<SearchHitKind, 'TITLE'>;
  rank: number;
  snippet: string;
}

/** A page of hits; `resumeAfter` when the page stopped at its bound of rows read before it was full: the next page starts there. */
export interface SearchPage {
  hits: SearchHit[];
  resumeAfter: SearchKey | null;
}

/** One part's hits, and where its reading stopped if it stopped early. */
interface Found {
  found: Candidate[];
  resumeAfter: SearchKey | null;
}

interface Row {
  type: string | null;
  snippet: string;
  descendants: number;
}

/** A hit found, before its snippet and descendants are read. */
interface Candidate {
  title: boolean;
  at: Date;
  sid: string;
  seq: number;
  rank: number;
}
type CandidateRow = Omit<Candidate, 'title'>;

type Binder = ((v: unknown) => string) & { length: number };
/** `$n` for a new parameter; `.length`: the number of parameters so far (the last one's n). */
function binder(params: unknown[]): Binder {
  const p = (v: unknown) => `$${params.push(v)}`;
  return Object.defineProperty(p, 'length', { get: () => params.length }) as Binder;
}

export class SessionSearch {
  constructor(
    private readonly pool: pg.Pool,
    private readonly log: SessionLog,
    /** Hot standbys: a search is read on one that has replayed all the primary had written when it began (read-replicas.ts readCaughtUp), else on the primary. */
    private readonly standbys?: Pick<ReadReplicas, 'readCaughtUp'>,
    private readonly onStandbyRead?: OnStandbyRead,
  ) {}

  /**
   * Up to `limit` hits of `query` (websearch syntax: words, "a phrase", -not, or)
   * in `tenant`'s sessions, after `after` in list order. A query without
   * searchable words (only stop words or punctuation) has no hits.
   */
  async search(tenant: string, query: string, opts: { limit: number; after?: SearchKey | null; statements?: StatementScope }): Promise<SearchPage> {
    if (opts.limit <= 0) return { hits: [], resumeAfter: null };
    // Every statement of a page on one server: the standby's or the primary's.
    return readCaughtUpOr(
      this.standbys,
      this.pool,
      (db) => this.searchOn(db, tenant, query, opts),
      (served) => this.onStandbyRead?.(served, 'search'),
      opts.statements,
    );
  }

  private async searchOn(db: Db, tenant: string, query: string, opts: { limit: number; after?: SearchKey | null }): Promise<SearchPage> {
    const { after, limit } = opts;
    // Titles only until the cursor has passed them; events fill the rest of the page.
    const titles = !after || after.title ? await this.titleCandidates(db, tenant, query, limit, after ?? null) : { found: [], resumeAfter: null };
    const { found } = titles;
    let { resumeAfter } = titles;
    if (found.length < limit && !resumeAfter) {
      const events = await this.eventCandidates(db, tenant, query, limit - found.length, after && !after.title ? after : null);
      found.push(...events.found);
      resumeAfter = events.resumeAfter;
    }
    if (found.length === 0) return { hits: [], resumeAfter };
    const params: unknown[] = [tenant, query, found.map((c) => (c.title ? 0 : 1)), found.map((c) => c.sid), found.map((c) => c.seq)];
    const q = `websearch_to_tsquery(${CONFIG}, $2)`;
    // Snippets and descendants for the page's hits only, in page order.
    const sql = `
      SELECT page.i, page.k, page.sid, page.seq, e.type,
             CASE WHEN page.k = 0
                  THEN ts_headline(${CONFIG}, s.title, ${q}, '${HEADLINE}, HighlightAll=true')
                  ELSE ts_headline(${CONFIG}, left(e.data ->> 'text', ${INDEXED_CHARS}), ${q}, '${HEADLINE}') END AS snippet,
             CASE WHEN page.k = 0 THEN (
               WITH RECURSIVE same(id, title) AS (
                 SELECT c.id, c.title FROM "Session" c WHERE c."parentId" = s.id AND md5(c.title) = md5(s.title) AND c.title = s.title
                 UNION ALL
                 SELECT c.id, c.title FROM same JOIN "Session" c ON c."parentId" = same.id AND md5(c.title) = md5(same.title) AND c.title = same.title
               ) SELECT count(*) FROM (SELECT 1 FROM same LIMIT ${DESCENDANTS_COUNTED}) counted)
             ELSE (
               SELECT count(*) FROM (SELECT 1 FROM "Session" d
                WHERE d."inheritedRanges" @> jsonb_build_array(jsonb_build_object('sessionId', page.sid))
                  AND d."inheritedRanges" <> '[]'::jsonb AND d.tenant = $1
                  AND EXISTS (SELECT 1 FROM jsonb_to_recordset(d."inheritedRanges") AS r("sessionId" text, "fromSeq" int, "toSeq" int)
                               WHERE r."sessionId" = page.sid AND page.seq BETWEEN r."fromSeq" AND r."toSeq")
                LIMIT ${DESCENDANTS_COUNTED}) counted)
             END::int AS descendants
        FROM unnest($3::int[], $4::text[], $5::int[]) WITH ORDINALITY AS page(k, sid, seq, i)
        JOIN "Session" s ON s.id = page.sid
        LEFT JOIN "Event" e ON page.k = 1 AND e."sessionId" = page.sid AND e."treeId" = s."treeId" AND e.seq = page.seq
       ORDER BY page.i`;
    const { rows } = await db.query<Row>(sql, params);
    const hits = await Promise.all(
      rows.map(async (r, i): Promise<SearchHit> => {
        const c = found[i];
        const key = { title: c.title, at: c.at.getTime(), sessionId: c.sid, seq: c.seq };
        // A title's seq: its last session/title event, read through the session's lineage.
        const seq = c.title ? ((await this.log.lastOfType(c.sid, 'session/title', MAX_SEQ, db))?.seq ?? 0) : c.seq;
        const kind: SearchHitKind = c.title ? 'TITLE' : r.type === 'inbox/add' ? 'INPUT' : 'MESSAGE';
        return { kind, sessionId: c.sid, seq, rank: c.rank, snippet: r.snippet, descendants: r.descendants, key };
      }),
    );
    return { hits, resumeAfter };
  }

  /**
   * Title hits after `after`, newest session first (then by id), over Session
   * (tenant, createdAt) and the title index. A fork whose title is its
   * parent's is not a hit (the parent's hit counts it).
   */
  private titleCandidates(db: Db, tenant: string, query: string, limit: number, after: SearchKey | null): Promise<Found> {
    return this.candidates(db, true, tenant, query, limit, after, TITLE_WINDOW, {
      scan: (p, k, columns, where, ordered = true) =>
        `SELECT s."createdAt" AS at, s.id AS sid, -1 AS seq, ${columns} FROM "Session" s
          WHERE s.tenant = $1 AND s.title IS NOT NULL ${where}
          ${k ? `AND s."createdAt" <= ${p(new Date(k.at))}::timestamptz AND (s."createdAt" < $${p.length}::timestamptz OR s.id > ${p(k.sessionId)}::text)` : ''}
          ${ordered ? 'ORDER BY s.tenant, s."createdAt" DESC, s.id' : ''}`,
      vector: TITLE_VECTOR,
      match: `${TITLE_VECTOR} @@ websearch_to_tsquery(${CONFIG}, $2) AND ${TITLE_NOT_PARENTS}`,
      // The older matches from the titles' own index ("SessionTitle", above).
      indexedMatch: `(s.id, s."treeId") IN (SELECT t."sessionId", t."treeId" FROM "SessionTitle" t WHERE ${titleVector('t')} @@ websearch_to_tsquery(${CONFIG}, $2)) AND ${TITLE_NOT_PARENTS}`,
      order: 'at DESC, sid',
    });
  }

  /** Input and answer hits after `after`, newest first (then by session id and seq, descending), over Event_text_recency_idx and the vectors' index. */
  private eventCandidates(db: Db, tenant: string, query: string, limit: number, after: SearchKey | null): Promise<Found> {
    return this.candidates(db, false, tenant, query, limit, after, EVENT_WINDOW, {
      // In order, the tenant's own rows (Event.tenant leads the recency index: another tenant's burst is not in the
      // window); the text index's rows, any tenant's (below).
      scan: (p, k, columns, where, ordered = true) =>
        `SELECT e."createdAt" AS at, e."sessionId" AS sid, e.seq, ${columns} FROM "Event" e
          WHERE ${SEARCHED_TYPES} ${ordered ? 'AND e.tenant = $1' : ''} ${where}
          ${k ? `AND (e."createdAt", e."sessionId", e.seq) < (${p(new Date(k.at))}::timestamptz, ${p(k.sessionId)}::text, ${p(k.seq)}::int)` : ''}
          ${ordered ? 'ORDER BY e."createdAt" DESC, e."sessionId" DESC, e.seq DESC' : ''}`,
      vector: EVENT_VECTOR,
      // The tenant: a correlated lookup, made for matches only (an EXISTS is planned as a hash of every session). The
      // row's tenant is not enough: a deleted session's events stay until they are reclaimed (store/reclaim.ts).
      match: `${EVENT_VECTOR} @@ websearch_to_tsquery(${CONFIG}, $2) AND (SELECT s.tenant FROM "Session" s WHERE s.id = e."sessionId") = $1`,
      // The index's older matches are counted before the tenant is asked, so that other tenants' matches bound what a page reads too.
      indexedMatch: `${EVENT_VECTOR} @@ websearch_to_tsquery(${CONFIG}, $2)`,
      owned: `(SELECT s.tenant FROM "Session" s WHERE s.id = m.sid) = $1`,
      order: 'at DESC, sid DESC, seq DESC',
    });
  }

  /**
   * One part's hits, in bounded steps. First its next `window` rows in list
   * order (`scan`: an ordered index walk), stopping as soon as the page is
   * full: a frequent word's page reads about a page's worth of rows divided by
   * its frequency. When the window holds too few matches, the words are rare
   * among the newest rows: the older matches come from the text index
   * (`indexedMatch`, which the planner serves from the GIN index for rare
   * words), at most a window's worth of them, in no order, and when they are
   * all there they are sorted. When there are more (a word common in older
   * rows that the tenant's newest ones lack, e.g. after it wrote thousands
   * of messages without them), the page walks on in list order, in windows that double, up
   * to WALK_WINDOWS windows of rows; a page still short then ends at the last
   * row read (`resumeAfter`). `match` is true of a row that is a hit (the
   * tenant included); `owned` keeps the tenant's rows among the index's
   * matches when `indexedMatch` does not; `order` is the list order over the
   * scan's columns. The vector and rank are computed for hits only.
   */
  private async candidates(
    db: Db,
    title: boolean,
    tenant: string,
    query: string,
    limit: number,
    after: SearchKey | null,
    window: number,
    part: {
      /** The part's rows after a key: the tenant's in list order, or, when `ordered` is false, the text index's matches (for events, any tenant's). */
      scan: (p: Binder, after: SearchKey | null, columns: string, where: string, ordered?: boolean) => string;
      vector: string;
      match: string;
      /** `match` as the text index serves it (default: `match` itself). */
      indexedMatch?: string;
      /** A condition on the index's matches (columns at, sid, seq) when `indexedMatch` leaves the tenant out. */
      owned?: string;
      order: string;
    },
  ): Promise<Found> {
    const q = `websearch_to_tsquery(${CONFIG}, $2)`;
    const toCandidate = (r: CandidateRow): Candidate => ({ title, at: r.at, sid: r.sid, seq: r.seq, rank: r.rank });
    const keyOf = (r: Pick<CandidateRow, 'at' | 'sid' | 'seq'>): SearchKey => ({ title, at: r.at.getTime(), sessionId: r.sid, seq: r.seq });
    const hitVector = `CASE WHEN ${part.match} THEN ${part.vector} END AS v`;
    const found: Candidate[] = [];
    /** The next `size` rows after `from` in list order: their hits (up to what the page lacks), and the last row read (none when they were the last). */
    const walk = async (from: SearchKey | null, size: number) => {
      const params: unknown[] = [tenant, query, limit - found.length];
      // The match is a column of the walk, not a condition the planner could serve from another index. The rows
      // are numbered as read, so that the window's last row (rn = size; none when the rows ran out first) comes
      // with its hits: read apart, with an OFFSET, it was planned as a sort of all the tenant's older rows
      // whenever the tenant's rows were not in the table's order.
      const { rows } = await db.query<CandidateRow & { rn: number; hit: boolean }>(
        `SELECT at, sid, seq, rn, v IS NOT NULL AS hit, ts_rank(v, ${q})::float8 AS rank
           FROM (SELECT * FROM (SELECT *, (row_number() OVER (ORDER BY ${part.order}))::int AS rn
                                  FROM (${part.scan(binder(params), from, hitVector, '')} LIMIT ${size}) w) w
                  WHERE v IS NOT NULL OR rn = ${size} ORDER BY ${part.order} LIMIT $3) m`,
        params,
      );
      found.push(...rows.filter((r) => r.hit).map(toCandidate));
      if (found.length >= limit) return null;
      const edge = rows.find((r) => r.rn === size);
      return edge ? keyOf(edge) : null;
    };
    const older = await walk(after, window);
    if (!older) return { found, resumeAfter: null };
    // The older matches from the text index, in no order, at most window + 1: read
    // in list order with a limit, the planner would walk the ordered index
    // instead, betting on finding the page early, and read every row when the words are rare.
    // Sorted before the tenant is asked (OFFSET 0 keeps the sort below the filter), so only
    // the rows up to the page's last hit are asked about.
    const rest: unknown[] = [tenant, query, limit - found.length];
    const probe = await db.query<Partial<CandidateRow> & { probed: number }>(
      `WITH m AS MATERIALIZED (${part.scan(binder(rest), older, `${part.vector} AS v`, `AND ${part.indexedMatch ?? part.match}`, false)} LIMIT ${window + 1}),
            hit AS (SELECT at, sid, seq, ts_rank(v, ${q})::float8 AS rank FROM (SELECT * FROM m ORDER BY ${part.order} OFFSET 0) m ${part.owned ? `WHERE ${part.owned}` : ''} LIMIT $3)
       SELECT (SELECT count(*) FROM m)::int AS probed, hit.* FROM (VALUES (1)) one LEFT JOIN hit ON true`,
      rest,
    );
    if (probe.rows[0].probed <= window) {
      for (const r of probe.rows) if (r.sid !== null && r.sid !== undefined) found.push(toCandidate(r as CandidateRow));
      return { found, resumeAfter: null };
    }
    // Common among the older rows: on in list order, a bounded number of rows.
    let from: SearchKey | null = older;
    for (let read = 0, size = 2 * window; from && read < WALK_WINDOWS * window; read += size, size *= 2) {
      from = await walk(from, Math.min(size, WALK_WINDOWS * window - read));
    }
    return { found, resumeAfter: found.length >= limit ? null : from };
  }

  /**
   * Up to `limit` matches of `query` in one session's log after seq `afterSeq`,
   * in seq order, the inherited prefix included (read where it is stored). Per
   * segment one scan: the planner walks the session's rows in seq order for a
   * common word (stopping at the limit) or takes a rare one's few rows from the
   * GIN index.
   */
  async searchSession(
    ref: string,
    query: string,
    opts: {
      afterSeq: number;
      limit: number;
      /** The log as of this length (a session row's eventCount). */ endSeq?: number;
      /** The request's scope (db/statement-deadlines.ts). */ statements?: StatementScope;
    },
  ): Promise<SessionSearchHit[]> {
    const l = await this.log.lineage(ref);
    if (!l) return [];
    const segments = segmentsOf({ ...l, endSeq: opts.endSeq }, Math.max(0, opts.afterSeq + 1), MAX_SEQ);
    if (segments.length === 0 || opts.limit <= 0) return [];
    const params: unknown[] = [query, opts.limit];
    const p = (v: unknown) => `$${params.push(v)}`;
    const q = `websearch_to_tsquery(${CONFIG}, $1)`;
    const scans = segments.map(
      (seg) => `(SELECT e.seq, e.type, e.data, ts_rank(${EVENT_VECTOR}, ${q})::float8 AS rank FROM "Event" e
                 WHERE e."sessionId" = ${p(seg.sessionId)} AND e."treeId" = ${p(seg.treeId)} AND e.seq BETWEEN ${p(seg.fromSeq)} AND ${p(seg.toSeq)} AND ${EVENT_VECTOR} @@ ${q}
                 ORDER BY e.seq LIMIT $2)`,
    );
    // Snippets for the page's hits only.
    const { rows } = await readingFor(this.pool, opts.statements).query<{ seq: number; type: string; rank: number; snippet: string }>(
      `SELECT seq, type, rank, ts_headline(${CONFIG}, left(data ->> 'text', ${INDEXED_CHARS}), ${q}, '${HEADLINE}') AS snippet
         FROM (SELECT * FROM (${scans.join(' UNION ALL ')}) m ORDER BY seq LIMIT $2) page ORDER BY seq`,
      params,
    );
    return rows.map((r) => ({ seq: r.seq, kind: r.type === 'inbox/add' ? 'INPUT' : 'MESSAGE', rank: r.rank, snippet: r.snippet }));
  }
}
