-- sessions(changedSince:) (issue 33): a list that lost its connection asks
-- for the sessions changed since what it last saw, in (updatedAt, id) order,
-- instead of reading every session again.
CREATE INDEX "Session_tenant_updatedAt_id_idx" ON "Session"("tenant", "updatedAt", "id");
