-- The workspace (issue 17, store/session-log.ts workspaceEntry and workspace):
-- note_write records each write as a plugin/workspace/write event
-- {callId, key, value} stored right before its tool/result, in the same
-- append. The workspace of a session is the latest such write per key through
-- its lineage ranges, so this partial index makes "the latest write of key K in
-- seqs a..b of session S" one index probe per range, and listing the keys a
-- skip scan. It holds only workspace writes: other appends do not touch it.
-- Prisma cannot declare it (an expression in a partial index).
CREATE INDEX "Event_workspace_idx" ON "Event" ("sessionId", (data ->> 'key'), seq)
  WHERE type = 'plugin/workspace/write';
