// Full-text search over a tenant's sessions (issue 17): user inputs (inbox/add
// text), model messages (model/message text) and session titles, ranked by
// ts_rank, title matches first, with ts_headline snippets.
//
// Migration 20261204000000_session_search keeps each searched event's tsvector
// (Event."searchVector") and GIN-indexes it, the titles (the title expression
// below must stay exactly that of its index) and forks' inheritedRanges (a
// partial index: the `<> '[]'` below lets the planner use it). Events are
// matched where they are stored: a fork's inherited prefix stays in the
// ancestor that wrote it (store/lineage.ts), so an inherited event matches
// once, at that session, and the hit counts the descendants sharing it (their
// inheritedRanges cover its seq). A forked title equal to its parent's is the
// parent's, likewise. Descendants, snippets and title seqs are computed for
// the hits of one page only.
//
// Cost: the index finds the matching rows; ranking reads each of them (the
// order is by rank), so a query costs what its matches cost, never the log.
// Not prepared: the best plan depends on how common the terms are.
import type pg from 'pg';
import type { SessionLog } from './session-log.ts';

/** The text search configuration of the indexes (English stemming and stop words). */
const CONFIG = `'english'::regconfig`;
/** Characters of a text that are indexed: to_tsvector fails above 1 MB of lexemes, and an append must never fail on its text. */
export const INDEXED_CHARS = 100_000;
/** Event."searchVector": generated from the same expression for inbox/add and model/message, null otherwise. */
const EVENT_VECTOR = `e."searchVector"`;
const TITLE_VECTOR = `to_tsvector(${CONFIG}, left(s.title, ${INDEXED_CHARS}))`;

/** Marks around the matched words of a snippet (the rest of it is plain text, not HTML). */
export const SNIPPET_START = '⟦';
export const SNIPPET_STOP = '⟧';
const HEADLINE = `StartSel=${SNIPPET_START}, StopSel=${SNIPPET_STOP}, MaxWords=30, MinWords=12, ShortWord=0, MaxFragments=2, FragmentDelimiter=" … "`;

export type SearchHitKind = 'TITLE' | 'INPUT' | 'MESSAGE';

/** A position in the ranked list: title hits first, then by rank (descending), session id, seq. */
export interface SearchKey {
  title: boolean;
  rank: number;
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
  /** Sessions forked from this one (at any depth) that share the matched event, or the title. */
  descendants: number;
  key: SearchKey;
}

interface Row {
  k: number;
  sid: string;
  seq: number;
  rank: number;
  type: string | null;
  snippet: string;
  descendants: number;
}

export class SessionSearch {
  constructor(
    private readonly pool: Pick<pg.Pool, 'query'>,
    private readonly log: SessionLog,
  ) {}

  /**
   * Up to `limit` hits of `query` (websearch syntax: words, "a phrase", -not, or)
   * in `tenant`'s sessions, after `after` in rank order. A query without
   * searchable words (only stop words or punctuation) has no hits.
   */
  async search(tenant: string, query: string, opts: { limit: number; after?: SearchKey | null }): Promise<SearchHit[]> {
    const after = opts.after;
    const params: unknown[] = [tenant, query, opts.limit];
    const p = (v: unknown) => `$${params.push(v)}`;
    const keyset = after
      ? `WHERE k > ${p(after.title ? 0 : 1)}::int OR (k = $${params.length}::int AND (rank < ${p(after.rank)}::float8 OR (rank = $${params.length}::float8
           AND (sid > ${p(after.sessionId)}::text OR (sid = $${params.length}::text AND seq > ${p(after.seq)}::int)))))`
      : '';
    // Title hits exclude a fork whose title is its parent's (the parent's hit counts it).
    const sql = `
      WITH page AS MATERIALIZED (
        SELECT k, sid, seq, rank FROM (
          SELECT 0 AS k, s.id AS sid, -1 AS seq, ts_rank(${TITLE_VECTOR}, websearch_to_tsquery(${CONFIG}, $2))::float8 AS rank
            FROM "Session" s LEFT JOIN "Session" p ON p.id = s."parentId"
           WHERE s.title IS NOT NULL AND ${TITLE_VECTOR} @@ websearch_to_tsquery(${CONFIG}, $2)
             AND s.tenant = $1 AND p.title IS DISTINCT FROM s.title
          UNION ALL
          SELECT 1, e."sessionId", e.seq, ts_rank(${EVENT_VECTOR}, websearch_to_tsquery(${CONFIG}, $2))::float8
            FROM "Event" e JOIN "Session" s ON s.id = e."sessionId"
           WHERE ${EVENT_VECTOR} @@ websearch_to_tsquery(${CONFIG}, $2)
             AND s.tenant = $1
        ) hits
        ${keyset}
        ORDER BY k, rank DESC, sid, seq
        LIMIT $3
      )
      SELECT page.k, page.sid, page.seq, page.rank, e.type,
             CASE WHEN page.k = 0
                  THEN ts_headline(${CONFIG}, s.title, websearch_to_tsquery(${CONFIG}, $2), '${HEADLINE}, HighlightAll=true')
                  ELSE ts_headline(${CONFIG}, left(e.data ->> 'text', ${INDEXED_CHARS}), websearch_to_tsquery(${CONFIG}, $2), '${HEADLINE}') END AS snippet,
             CASE WHEN page.k = 0 THEN (
               WITH RECURSIVE same(id, title) AS (
                 SELECT c.id, c.title FROM "Session" c WHERE c."parentId" = s.id AND c.title = s.title
                 UNION ALL
                 SELECT c.id, c.title FROM same JOIN "Session" c ON c."parentId" = same.id AND c.title = same.title
               ) SELECT count(*) FROM same)
             ELSE (
               SELECT count(*) FROM "Session" d
                WHERE d."inheritedRanges" @> jsonb_build_array(jsonb_build_object('sessionId', page.sid))
                  AND d."inheritedRanges" <> '[]'::jsonb AND d.tenant = $1
                  AND EXISTS (SELECT 1 FROM jsonb_to_recordset(d."inheritedRanges") AS r("sessionId" text, "fromSeq" int, "toSeq" int)
                               WHERE r."sessionId" = page.sid AND page.seq BETWEEN r."fromSeq" AND r."toSeq"))
             END::int AS descendants
        FROM page
        JOIN "Session" s ON s.id = page.sid
        LEFT JOIN "Event" e ON page.k = 1 AND e."sessionId" = page.sid AND e.seq = page.seq
       ORDER BY page.k, page.rank DESC, page.sid, page.seq`;
    const { rows } = await this.pool.query<Row>(sql, params);
    return Promise.all(
      rows.map(async (r): Promise<SearchHit> => {
        const title = r.k === 0;
        const key = { title, rank: r.rank, sessionId: r.sid, seq: r.seq };
        // A title's seq: its last session/title event, read through the session's lineage.
        const seq = title ? ((await this.log.lastOfType(r.sid, 'session/title'))?.seq ?? 0) : r.seq;
        const kind: SearchHitKind = title ? 'TITLE' : r.type === 'inbox/add' ? 'INPUT' : 'MESSAGE';
        return { kind, sessionId: r.sid, seq, rank: r.rank, snippet: r.snippet, descendants: r.descendants, key };
      }),
    );
  }
}
