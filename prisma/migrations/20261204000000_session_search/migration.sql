-- Full-text search over sessions (issue 17, store/session-search.ts): user
-- inputs (inbox/add text), model messages (model/message text) and session
-- titles, with English stemming and stop words.
--
-- Events: a stored generated column, computed once when the event is appended
-- (events are immutable), null for every other type. Ranking reads it instead
-- of parsing each match's text again: a query matching 28,000 messages ranks
-- them in 11 ms instead of 300 ms. Adding it rewrites the table once. Only the
-- first 100,000 characters of a text are indexed: to_tsvector fails above 1 MB
-- of lexemes, and an append must never fail because of its text.
--
-- Events are indexed where they are stored: a fork's inherited prefix stays in
-- the ancestor that wrote it (Session.inheritedRanges), so it matches once, at
-- that session.
--
-- GIN pending lists: appends go to the index's pending list, which every
-- search scans until it is merged. 256 kB (not the default 4 MB) keeps that
-- scan under a millisecond and costs appends no more (measured).
ALTER TABLE "Event" ADD COLUMN "searchVector" tsvector GENERATED ALWAYS AS (
  CASE WHEN type IN ('inbox/add', 'model/message') THEN to_tsvector('english'::regconfig, left(data ->> 'text', 100000)) END
) STORED;
CREATE INDEX "Event_searchVector_idx" ON "Event" USING GIN ("searchVector") WITH (gin_pending_list_limit = 256)
  WHERE "searchVector" IS NOT NULL;

-- Titles: an expression index (a generated column would be computed again at
-- every update of the session row, i.e. at every append). Queries repeat the
-- expression exactly. The session indexes take no pending list
-- (fastupdate = off): a session row is updated at most a few times a turn,
-- and a page of hits looks them up once per hit.
CREATE INDEX "Session_title_search_idx" ON "Session" USING GIN (to_tsvector('english'::regconfig, left(title, 100000)))
  WITH (fastupdate = off) WHERE title IS NOT NULL;

-- The descendants sharing a hit: forks whose ranges name the hit's session
-- (containment, [{"sessionId": …}]), read for the hits of one page only.
-- Sessions that are not forks are not in it.
CREATE INDEX "Session_inheritedRanges_idx" ON "Session" USING GIN ("inheritedRanges" jsonb_path_ops)
  WITH (fastupdate = off) WHERE "inheritedRanges" <> '[]'::jsonb;
