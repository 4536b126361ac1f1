-- Big files chunked, and tree checkpoints (issue 31, store/file-blobs.ts,
-- store/file-tree-checkpoints.ts). A file bigger than one chunk is stored as
-- content-defined chunks (core/file-chunks.ts), each once by sha-256: its
-- FileBlob row keeps its hash and size, no content, and FileBlobChunk lists
-- its chunks in order. A checkpoint is the file tree of a log as of a seq, so
-- reading a tree folds only the change sets after the nearest one.
-- (Named after runner_pools, the last migration, not by the clock: it alters
-- FileBlob, made by 20261206310000_file_workspace, and runs after it.)

-- AlterTable
ALTER TABLE "FileBlob" ALTER COLUMN "content" DROP NOT NULL;

-- CreateTable
CREATE TABLE "FileChunk" (
    "hash" TEXT NOT NULL,
    "size" INTEGER NOT NULL,
    "content" BYTEA NOT NULL,

    CONSTRAINT "FileChunk_pkey" PRIMARY KEY ("hash")
);

-- CreateTable
CREATE TABLE "FileBlobChunk" (
    "blobHash" TEXT NOT NULL,
    "idx" INTEGER NOT NULL,
    "chunkHash" TEXT NOT NULL,

    CONSTRAINT "FileBlobChunk_pkey" PRIMARY KEY ("blobHash","idx")
);

-- CreateTable
CREATE TABLE "FileTreeCheckpoint" (
    "sessionId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "tree" JSONB NOT NULL,

    CONSTRAINT "FileTreeCheckpoint_pkey" PRIMARY KEY ("sessionId","seq")
);

-- CreateIndex
CREATE INDEX "FileBlobChunk_chunkHash_idx" ON "FileBlobChunk"("chunkHash");

-- AddForeignKey
ALTER TABLE "FileBlobChunk" ADD CONSTRAINT "FileBlobChunk_blobHash_fkey" FOREIGN KEY ("blobHash") REFERENCES "FileBlob"("hash") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "FileBlobChunk" ADD CONSTRAINT "FileBlobChunk_chunkHash_fkey" FOREIGN KEY ("chunkHash") REFERENCES "FileChunk"("hash") ON DELETE NO ACTION ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "FileTreeCheckpoint" ADD CONSTRAINT "FileTreeCheckpoint_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;
