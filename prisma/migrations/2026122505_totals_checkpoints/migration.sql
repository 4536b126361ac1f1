-- Session.totals through a seq (store/totals-checkpoints.ts, docs/long-sessions.md
-- "Session totals"): a read starts from the nearest checkpoint its log inherits
-- and sums only the events after it. Kept under the session that stores event
-- `seq` (like "FoldCheckpoint"), so forks use it too. Filled as logs are read:
-- a session's first read sums its log once and keeps one.
CREATE TABLE "TotalsCheckpoint" (
    "sessionId" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "turns" INTEGER NOT NULL,
    "endedTurns" INTEGER NOT NULL,
    "steps" INTEGER NOT NULL,
    "toolCalls" DOUBLE PRECISION NOT NULL,
    "inputTokens" DOUBLE PRECISION NOT NULL,
    "outputTokens" DOUBLE PRECISION NOT NULL,
    "costUsd" DOUBLE PRECISION,
    "spanMs" DOUBLE PRECISION NOT NULL,
    "lastStartMs" DOUBLE PRECISION NOT NULL,

    CONSTRAINT "TotalsCheckpoint_pkey" PRIMARY KEY ("sessionId","seq","treeId")
);

ALTER TABLE "TotalsCheckpoint" ADD CONSTRAINT "TotalsCheckpoint_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;
