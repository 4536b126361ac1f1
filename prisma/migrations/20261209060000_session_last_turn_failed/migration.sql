-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "lastTurnFailed" BOOLEAN NOT NULL DEFAULT false;

-- Existing sessions: their own last turn/end (one probe of the (sessionId, type, seq) index each).
-- A fork with no turn of its own keeps false, as a fork made now at an earlier cut does.
UPDATE "Session" s
   SET "lastTurnFailed" = true
 WHERE (SELECT e.data->>'reason'
          FROM "Event" e
         WHERE e."sessionId" = s.id AND e."treeId" = s."treeId" AND e.type = 'turn/end'
         ORDER BY e.seq DESC
         LIMIT 1) = 'failed';
