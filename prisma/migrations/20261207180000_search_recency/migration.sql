-- Search whose first page does not grow with the corpus (issue 34), and
-- event filters served by the server (issue 33).
--
-- (Named after tree_keys, the last migration before it.)
--
-- searchSessions lists hits newest first (store/session-search.ts): a btree
-- over the searchable events in that order lets a common word's first page
-- stop after its first rows, and a rare word's few matches still come from
-- the GIN index (the planner picks by the word's frequency). The predicate
-- names the searchable types (that of Event."searchVector") so that this
-- migration needs nothing a later one creates.
CREATE INDEX "Event_text_recency_idx" ON "Event" ("createdAt", "sessionId", seq)
  WHERE type IN ('inbox/add', 'model/message');

-- Synthetic events (repair's closers, fork seeds) are few: a filter on them
-- reads a session's synthetic rows, never its log.
CREATE INDEX "Event_synthetic_idx" ON "Event" ("sessionId", seq) WHERE synthetic;
