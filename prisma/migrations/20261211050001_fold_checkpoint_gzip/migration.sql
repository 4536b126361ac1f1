-- Fold checkpoints are stored gzipped, in a new format (agent/session-fold.ts):
-- the old ones are dropped (a cold start without one replays the log, and the
-- next run past the checkpoint interval writes a new one).
DELETE FROM "FoldCheckpoint";

-- AlterTable
ALTER TABLE "FoldCheckpoint" DROP COLUMN "state",
ADD COLUMN     "state" BYTEA NOT NULL;
