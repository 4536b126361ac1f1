-- The agent's folded state of a log through a seq (docs/long-sessions.md "Cold
-- starts"): a cold start reads the nearest checkpoint its log inherits and the
-- events after it instead of replaying the whole log. Kept under the session
-- that stores event `seq` (like "FileTreeCheckpoint"), so forks use it too.
CREATE TABLE "FoldCheckpoint" (
    "sessionId" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "state" TEXT NOT NULL,

    CONSTRAINT "FoldCheckpoint_pkey" PRIMARY KEY ("sessionId","seq","treeId")
);

ALTER TABLE "FoldCheckpoint" ADD CONSTRAINT "FoldCheckpoint_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;
