-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "modelName" TEXT,
ADD COLUMN     "modelProvider" TEXT;

-- Existing sessions: the last session/model event of their log. A session's log
-- is its own events, after its parent's up to its cut (and so on up the
-- lineage): the nearest ancestor level with one at or before the cuts wins
-- (one probe of the (sessionId, type, seq) index per level).
WITH RECURSIVE chain AS (
  SELECT s.id AS sid, s.id AS cur, s."treeId" AS tree, NULL::int AS upto, 0 AS depth, s."parentId" AS parent, s."forkedAtSeq" AS cut
    FROM "Session" s
  UNION ALL
  SELECT c.sid, p.id, p."treeId", LEAST(COALESCE(c.upto, c.cut), c.cut), c.depth + 1, p."parentId", p."forkedAtSeq"
    FROM chain c
    JOIN "Session" p ON p.id = c.parent AND p."treeId" = c.tree
), found AS (
  SELECT DISTINCT ON (c.sid) c.sid, m.data
    FROM chain c
    CROSS JOIN LATERAL (
      SELECT e.data
        FROM "Event" e
       WHERE e."sessionId" = c.cur AND e."treeId" = c.tree AND e.type = 'session/model' AND (c.upto IS NULL OR e.seq <= c.upto)
       ORDER BY e.seq DESC
       LIMIT 1) m
   ORDER BY c.sid, c.depth
)
UPDATE "Session" s
   SET "modelProvider" = f.data->>'provider', "modelName" = f.data->>'model'
  FROM found f
 WHERE f.sid = s.id;
