-- Fold checkpoints are stored gzipped, in a new format with the history apart
-- (agent/session-fold.ts): the old ones are dropped (a cold start without one
-- replays the log, and the next run past the checkpoint interval writes one).
DELETE FROM "FoldCheckpoint";

-- AlterTable
ALTER TABLE "FoldCheckpoint" ADD COLUMN     "history" BYTEA NOT NULL,
DROP COLUMN "state",
ADD COLUMN     "state" BYTEA NOT NULL;
