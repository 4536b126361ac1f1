-- A tree's sessions, with id second. A burst of forks into one tree (fanOut)
-- leaves the planner's statistics saying each tree has about one session, and
-- a read by (id, treeId) may then be planned on this index instead of the
-- key: with id in the index it still reads one entry, not the whole tree.
DROP INDEX "Session_treeId_idx";

CREATE INDEX "Session_treeId_id_idx" ON "Session"("treeId", "id");

-- A session's children that kept its title (search counts them as sharing a
-- title hit): by the md5 of the title, since a btree entry cannot hold a long
-- title. Without it the count reads every child of the root, thousands after
-- a fan-out. Prisma cannot declare an expression index (schema.prisma says so).
CREATE INDEX "Session_parentId_title_md5_idx" ON "Session"("parentId", md5("title")) WHERE "parentId" IS NOT NULL AND "title" IS NOT NULL;
