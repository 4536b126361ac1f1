-- Every append updates the session row and moves "updatedAt", so none is a
-- HOT update: each writes a new entry into every index of "Session" whose
-- predicate the new row meets (docs/benchmarks.md, "Index entries per turn").
-- Two of them only serve rows most sessions are not: they become partial,
-- and an append to a session outside them writes nothing there.
-- An external runner pool's sessions (store/leases.ts RunnerLeases): every
-- lookup names the pool (runner = …); forkline's own sessions have none.
DROP INDEX "Session_runner_status_pendingInputCount_idx";
CREATE INDEX "Session_runner_status_pendingInputCount_idx" ON "Session" (runner, status, "pendingInputCount") WHERE runner IS NOT NULL;

-- Sessions by status (the list's status filter): idle ones, the most, are
-- found through the tenant's list instead. Work to claim walks
-- Session_runnable_updatedAt_idx (migration 20261212020001_session_runnable_index).
DROP INDEX "Session_status_pendingInputCount_idx";
CREATE INDEX "Session_status_pendingInputCount_idx" ON "Session" (status, "pendingInputCount") WHERE status <> 'IDLE';
