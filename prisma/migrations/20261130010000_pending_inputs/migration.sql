-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "pendingInputCount" INTEGER NOT NULL DEFAULT 0;

-- CreateIndex
CREATE INDEX "Session_status_pendingInputCount_idx" ON "Session"("status", "pendingInputCount");

