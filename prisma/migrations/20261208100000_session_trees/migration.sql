-- The directory of fork trees (issue 34, sharding): which tree each session
-- lies in, the one thing looked up by a session's id alone. The store reads a
-- session's tree there once (then caches it: a session never changes trees)
-- and names it in every statement on the session's rows, so a distributed
-- Postgres (Citus, tables distributed by "treeId") routes each to one shard:
-- there this table is a reference table, a copy on every node.
-- docs/operations.md: the steps to run on Citus.

CREATE TABLE "SessionTree" (
    "id" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,

    CONSTRAINT "SessionTree_pkey" PRIMARY KEY ("id")
);

-- Every session that exists already.
INSERT INTO "SessionTree" ("id", "treeId") SELECT "id", "treeId" FROM "Session";

-- What Session's reference names.
CREATE UNIQUE INDEX "SessionTree_id_treeId_key" ON "SessionTree"("id", "treeId");

-- Every session is in the directory, under its own tree: written with the row.
ALTER TABLE "Session" ADD CONSTRAINT "Session_id_treeId_fkey" FOREIGN KEY ("id", "treeId") REFERENCES "SessionTree"("id", "treeId") ON DELETE NO ACTION ON UPDATE CASCADE;

-- The directory's key keeps session ids unique, on plain and on distributed
-- Postgres alike (lookups by id use Session_pkey, id first).
DROP INDEX "Session_id_key";
