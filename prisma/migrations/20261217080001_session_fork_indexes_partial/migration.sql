-- Two indexes of "Session" hold forks only: a root (most sessions) has no
-- entry in them, so its appends, which update its row and so write an entry
-- into every index whose predicate it meets, write none there
-- (docs/benchmarks.md, "Index entries per turn"). A fork lies in its root's
-- tree and a root or an imported session is its own: "treeId" <> id is being
-- a fork, and the reads of children and of a tree's forks state it
-- (store/session-rows.ts isFork), so the planner can use these indexes.
--
-- A session's children. Not partial on "parentId" IS NOT NULL: `"parentId" = …`
-- implies that, and with statistics lagging a burst of forks search's
-- title-descendant count then walked this index instead of
-- Session_parentId_title_md5_idx, reading every child of the root
-- (tests/graphql/search-fork-burst.test.ts).
DROP INDEX "Session_parentId_createdAt_idx";
CREATE INDEX "Session_parentId_createdAt_idx" ON "Session" ("parentId", "createdAt") WHERE "treeId" <> id;

-- A tree's forks (its root is read by the key). A read by (id, treeId) no
-- longer has this index to stray onto under stale statistics.
DROP INDEX "Session_treeId_id_idx";
CREATE INDEX "Session_treeId_id_idx" ON "Session" ("treeId", id) WHERE "treeId" <> id;

-- Each build holds a SHARE lock on "Session" (writes wait, reads go on) while
-- it reads the table: docs/operations.md, "Upgrading".
