-- Fork trees as the unit of placement (issue 34): every table of session data
-- carries the tree (Session."treeId", the root's id) in its primary key, and
-- every reference between them stays within a tree, which is what a
-- distributed Postgres (Citus, tables distributed by "treeId") requires of
-- keys and foreign keys. On plain Postgres nothing else changes: a session id
-- stays unique on its own (Session_id_key, for lookups by id), and so is
-- (sessionId, seq) of an event, since a session lies in one tree. The
-- (sessionId, seq) order of the keys is kept first, for the keyset scans.
-- docs/operations.md: the steps to run on Citus.

ALTER TABLE "Session" DROP CONSTRAINT "Session_parentId_fkey";
ALTER TABLE "Event" DROP CONSTRAINT "Event_sessionId_fkey";
ALTER TABLE "SessionBlob" DROP CONSTRAINT "SessionBlob_sessionId_fkey";
ALTER TABLE "FileTreeCheckpoint" DROP CONSTRAINT "FileTreeCheckpoint_sessionId_fkey";

CREATE UNIQUE INDEX "Session_id_key" ON "Session"("id");
ALTER TABLE "Session" DROP CONSTRAINT "Session_pkey",
ADD CONSTRAINT "Session_pkey" PRIMARY KEY ("id", "treeId");

ALTER TABLE "Event" DROP CONSTRAINT "Event_pkey",
ADD CONSTRAINT "Event_pkey" PRIMARY KEY ("sessionId", "seq", "treeId");

-- A session's file blobs: its tree, from the session.
ALTER TABLE "SessionBlob" ADD COLUMN "treeId" TEXT;
UPDATE "SessionBlob" b SET "treeId" = s."treeId" FROM "Session" s WHERE s.id = b."sessionId";
ALTER TABLE "SessionBlob" ALTER COLUMN "treeId" SET NOT NULL,
DROP CONSTRAINT "SessionBlob_pkey",
ADD CONSTRAINT "SessionBlob_pkey" PRIMARY KEY ("sessionId", "hash", "treeId");

-- A session's file tree checkpoints: its tree, from the session.
ALTER TABLE "FileTreeCheckpoint" ADD COLUMN "treeId" TEXT;
UPDATE "FileTreeCheckpoint" c SET "treeId" = s."treeId" FROM "Session" s WHERE s.id = c."sessionId";
ALTER TABLE "FileTreeCheckpoint" ALTER COLUMN "treeId" SET NOT NULL,
DROP CONSTRAINT "FileTreeCheckpoint_pkey",
ADD CONSTRAINT "FileTreeCheckpoint_pkey" PRIMARY KEY ("sessionId", "seq", "treeId");

ALTER TABLE "Session" ADD CONSTRAINT "Session_parentId_treeId_fkey" FOREIGN KEY ("parentId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE NO ACTION ON UPDATE CASCADE;
ALTER TABLE "Event" ADD CONSTRAINT "Event_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "SessionBlob" ADD CONSTRAINT "SessionBlob_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "FileTreeCheckpoint" ADD CONSTRAINT "FileTreeCheckpoint_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;
