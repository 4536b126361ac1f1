-- The sessions forkline's own runner may claim (store/leases.ts claimRunnable:
-- a turn running or an input queued, not waiting on a decision, no external
-- runner), in the order claims take them (oldest change first). Through the
-- (status, pendingInputCount) index a claim read every runnable session and
-- sorted them to take the few its free slots allow: with 1,000 messages queued
-- at once and 100 slots, each of the ~70 claims read ~1,000 rows (the `turns`
-- bench: 0.2–0.4 ms of Postgres time a turn). Walked in this order, a claim
-- reads about the rows it takes (held sessions, the newest changed, come last).
-- The predicate repeats the claim's conditions literally (the planner matches
-- them as written).
CREATE INDEX "Session_runnable_updatedAt_idx" ON "Session" ("updatedAt")
  WHERE (status = 'RUNNING' OR "pendingInputCount" > 0) AND status <> 'WAITING' AND runner IS NULL;
