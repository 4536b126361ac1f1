-- Copy-free forks (DESIGN §1, §3.1): a child stores only its own events and
-- reads its inherited prefix from its ancestors through Session.inheritedRanges
-- ([{sessionId, fromSeq, toSeq}], contiguous from seq 0). Events are keyed by
-- (sessionId, seq), and their GraphQL ids are derived from (session read through, seq).
-- Sessions and events carry the root of their fork tree (treeId).
--
-- Existing databases: every copied child whose copy equals its parent's events
-- (type, data, synthetic, createdAt at every seq of the prefix) is converted:
-- its ranges are recorded and its copied rows removed. A child whose copy
-- differs (only possible by editing the database by hand) keeps its rows: the
-- store reads both forms, since a session's own rows start after its last range
-- and a session without ranges owns all its rows. Nothing is lost.
--
-- Prisma's migration runner splits statements at every semicolon, so the
-- PL/pgSQL body below spells its semicolons as \x3B inside an escape string.

-- The conversion rewrites event rows: the immutability trigger is lifted for this migration only.
ALTER TABLE "Event" DISABLE TRIGGER "Event_immutable";

-- Sessions: fork tree root and inherited ranges.
ALTER TABLE "Session" DROP CONSTRAINT "Session_parentId_fkey";
ALTER TABLE "Session" ADD COLUMN "inheritedRanges" JSONB NOT NULL DEFAULT '[]',
ADD COLUMN "treeId" TEXT;

WITH RECURSIVE tree AS (
  SELECT id, id AS root FROM "Session" WHERE "parentId" IS NULL
  UNION ALL
  SELECT s.id, tree.root FROM "Session" s JOIN tree ON s."parentId" = tree.id
)
UPDATE "Session" s SET "treeId" = tree.root FROM tree WHERE s.id = tree.id;
UPDATE "Session" SET "treeId" = id WHERE "treeId" IS NULL;
ALTER TABLE "Session" ALTER COLUMN "treeId" SET NOT NULL;

-- Events: the session's pending input count after each event, and the tree
-- root, computed over the rows as they are stored now (copies included).
ALTER TABLE "Event" ADD COLUMN "pendingInputCount" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN "treeId" TEXT;
UPDATE "Event" e SET "pendingInputCount" = x.pending, "treeId" = s."treeId"
  FROM (SELECT "sessionId", seq,
               sum(CASE type WHEN 'inbox/add' THEN 1 WHEN 'inbox/remove' THEN -1 ELSE 0 END)
                 OVER (PARTITION BY "sessionId" ORDER BY seq)::int AS pending
          FROM "Event") x,
       "Session" s
 WHERE e."sessionId" = x."sessionId" AND e.seq = x.seq AND s.id = e."sessionId";

-- Copied children whose copy is exactly their parent's prefix.
CREATE TABLE "_forkline_shared_prefix" AS
SELECT c.id, c."parentId", c."forkedAtSeq" AS cut
  FROM "Session" c
 WHERE c."parentId" IS NOT NULL
   AND c."forkedAtSeq" >= 0
   AND c."inheritedEventCount" = c."forkedAtSeq" + 1
   AND (SELECT count(*) FROM "Event" e WHERE e."sessionId" = c.id AND e.seq <= c."forkedAtSeq") = c."forkedAtSeq" + 1
   AND NOT EXISTS (
     SELECT 1
       FROM "Event" e
       LEFT JOIN "Event" p ON p."sessionId" = c."parentId" AND p.seq = e.seq
      WHERE e."sessionId" = c.id AND e.seq <= c."forkedAtSeq"
        AND (p.seq IS NULL OR p.type <> e.type OR p.data <> e.data OR p.synthetic <> e.synthetic OR p."createdAt" <> e."createdAt"));

-- Their ranges: the parent's ranges up to the cut, then the parent's own rows
-- through the cut. Sessions that are not converted own all their rows.
WITH RECURSIVE lineage(id, ranges, own_from) AS (
  SELECT s.id, '[]'::jsonb, 0
    FROM "Session" s
   WHERE NOT EXISTS (SELECT 1 FROM "_forkline_shared_prefix" c WHERE c.id = s.id)
  UNION ALL
  SELECT c.id,
         COALESCE((SELECT jsonb_agg(jsonb_build_object('sessionId', r->>'sessionId', 'fromSeq', (r->>'fromSeq')::int,
                                                       'toSeq', LEAST((r->>'toSeq')::int, c.cut)) ORDER BY ord)
                     FROM jsonb_array_elements(p.ranges) WITH ORDINALITY AS x(r, ord)
                    WHERE (r->>'fromSeq')::int <= c.cut), '[]'::jsonb)
         || CASE WHEN c.cut >= p.own_from
                 THEN jsonb_build_array(jsonb_build_object('sessionId', p.id, 'fromSeq', p.own_from, 'toSeq', c.cut))
                 ELSE '[]'::jsonb END,
         c.cut + 1
    FROM "_forkline_shared_prefix" c
    JOIN lineage p ON p.id = c."parentId"
)
UPDATE "Session" s SET "inheritedRanges" = lineage.ranges
  FROM lineage
 WHERE s.id = lineage.id AND lineage.ranges <> '[]'::jsonb;

DELETE FROM "Event" e USING "_forkline_shared_prefix" c WHERE e."sessionId" = c.id AND e.seq <= c.cut;
DROP TABLE "_forkline_shared_prefix";

-- Events keyed by (sessionId, seq): the unique index becomes the primary key.
ALTER TABLE "Event" DROP CONSTRAINT "Event_pkey",
DROP COLUMN "id",
DROP COLUMN "inherited";
ALTER TABLE "Event" ALTER COLUMN "treeId" SET NOT NULL;
ALTER TABLE "Event" ADD CONSTRAINT "Event_pkey" PRIMARY KEY USING INDEX "Event_sessionId_seq_key";

-- CreateIndex
CREATE INDEX "Session_treeId_idx" ON "Session"("treeId");

-- A session whose events a child shares cannot be deleted without that child
-- (checked at the end of the statement, so a subtree goes in one DELETE).
ALTER TABLE "Session" ADD CONSTRAINT "Session_parentId_fkey" FOREIGN KEY ("parentId") REFERENCES "Session"("id") ON DELETE NO ACTION ON UPDATE CASCADE;

-- Events stay immutable, with one exception: is the store's deletion of whole
-- sessions (deleteSession), which sets forkline.deleting_sessions in its transaction.
CREATE OR REPLACE FUNCTION forkline_event_immutable() RETURNS trigger LANGUAGE plpgsql AS E'
BEGIN
  IF TG_OP = ''DELETE'' AND current_setting(''forkline.deleting_sessions'', true) = ''on'' THEN
    RETURN OLD\x3B
  END IF\x3B
  RAISE EXCEPTION ''forkline events are immutable (% on event %/%)'', TG_OP, OLD."sessionId", OLD.seq\x3B
END';
ALTER TABLE "Event" ENABLE TRIGGER "Event_immutable";
