-- Deletion in two steps (store/reclaim.ts; docs/contract.md#deletion): the
-- sessions' rows go at once, in one short transaction; the events they wrote
-- and the blobs only they stored are reclaimed afterwards in bounded chunks by
-- whichever process takes the deletion's row (FOR UPDATE SKIP LOCKED). The
-- state is here, so a restarted process continues where one stopped. treeId is
-- in both keys as in every table of session data: a deletion lies in one tree.

-- CreateTable
CREATE TABLE "Deletion" (
    "id" TEXT NOT NULL,
    "sessionId" TEXT NOT NULL,
    "tenant" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,
    "sessionCount" INTEGER NOT NULL,
    "eventCount" INTEGER NOT NULL,
    "reclaimedEventCount" INTEGER NOT NULL DEFAULT 0,
    "blobHashes" TEXT[],
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" TIMESTAMPTZ(3),

    CONSTRAINT "Deletion_pkey" PRIMARY KEY ("id","treeId")
);

-- CreateTable
CREATE TABLE "DeletedSession" (
    "sessionId" TEXT NOT NULL,
    "deletionId" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,
    "nextSeq" INTEGER NOT NULL DEFAULT 0,

    CONSTRAINT "DeletedSession_pkey" PRIMARY KEY ("sessionId","treeId")
);

-- CreateIndex
CREATE INDEX "Deletion_sessionId_idx" ON "Deletion"("sessionId");

-- CreateIndex
CREATE INDEX "Deletion_finishedAt_createdAt_idx" ON "Deletion"("finishedAt", "createdAt");

-- CreateIndex
CREATE INDEX "DeletedSession_deletionId_sessionId_idx" ON "DeletedSession"("deletionId", "sessionId");

-- AddForeignKey
ALTER TABLE "DeletedSession" ADD CONSTRAINT "DeletedSession_deletionId_fkey" FOREIGN KEY ("deletionId", "treeId") REFERENCES "Deletion"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;
