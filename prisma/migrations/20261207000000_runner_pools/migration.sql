-- External runner pools (issue 32): the pool that runs a session, kept by its forks.

-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "runner" TEXT;

-- CreateIndex
CREATE INDEX "Session_runner_status_pendingInputCount_idx" ON "Session"("runner", "status", "pendingInputCount");
