-- The file workspace (issue 31, store/file-blobs.ts): file contents stored
-- once by sha-256, whatever the number of sessions, files or versions holding
-- them, and which session stored which blob, so deleting sessions deletes the
-- blobs no remaining session stored. A call's change set (which paths it
-- added, changed or deleted, by hash) is a plugin/files/change event in the
-- log, read through the (sessionId, type, seq) index like other typed reads.
-- CreateTable
CREATE TABLE "FileBlob" (
    "hash" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "content" BYTEA NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "FileBlob_pkey" PRIMARY KEY ("hash")
);

-- CreateTable
CREATE TABLE "SessionBlob" (
    "sessionId" TEXT NOT NULL,
    "hash" TEXT NOT NULL,

    CONSTRAINT "SessionBlob_pkey" PRIMARY KEY ("sessionId","hash")
);

-- CreateIndex
CREATE INDEX "SessionBlob_hash_idx" ON "SessionBlob"("hash");

-- AddForeignKey
ALTER TABLE "SessionBlob" ADD CONSTRAINT "SessionBlob_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "SessionBlob" ADD CONSTRAINT "SessionBlob_hash_fkey" FOREIGN KEY ("hash") REFERENCES "FileBlob"("hash") ON DELETE NO ACTION ON UPDATE CASCADE;

