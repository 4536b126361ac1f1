-- Search's list order per tenant (store/session-search.ts): the newest inputs
-- and answers a page reads in order are its tenant's own, so another tenant's
-- burst of fresh messages no longer fills that window and sends the page to
-- the text index, whose bitmap of a common word's matches is built whole
-- before any limit applies (GIN has no ordered scan): at 100,000 sessions, a
-- page's statements took 29 ms for a phrase and 44 ms for a common word after
-- another tenant's 3,000 answers, against 6 and 2 ms before them; now the same
-- 6 and 2 ms, the same statements and buffers as before the burst.
--
-- Event.tenant: the session's tenant, written with each event by the append,
-- fork and recording paths (a session never changes tenant). Rows written
-- before this migration get it here for the searchable types only, the rows
-- the index below holds; other old rows keep null. The immutability trigger is
-- lifted for this backfill only; the recency index goes first so that the
-- backfill does not update it, and comes back led by the tenant. The whole
-- runs in one transaction that locks "Event" (docs/operations.md).
ALTER TABLE "Event" ADD COLUMN "tenant" TEXT;

DROP INDEX "Event_text_recency_idx";

ALTER TABLE "Event" DISABLE TRIGGER "Event_immutable";
UPDATE "Event" e SET "tenant" = s.tenant
  FROM "Session" s
 WHERE s.id = e."sessionId" AND s."treeId" = e."treeId" AND e.type IN ('inbox/add', 'model/message');
ALTER TABLE "Event" ENABLE TRIGGER "Event_immutable";

CREATE INDEX "Event_text_recency_idx" ON "Event" ("tenant", "createdAt", "sessionId", seq)
  WHERE type IN ('inbox/add', 'model/message');
