-- What a session's waiting inputs weigh (core/log-state.ts inputBytes), kept by
-- the statements that keep "pendingInputCount": the inbox's byte bound
-- (docs/contract.md#append-rules, rule `inbox`) is checked in the statement
-- that queues an input. Inputs already waiting count 0 (a constant default
-- rewrites no row, where weighing them would read every session's inbox): the
-- column never goes below 0 and is 0 again once the inbox is empty, so it is
-- exact from then on.
ALTER TABLE "Session" ADD COLUMN "pendingInputBytes" INTEGER NOT NULL DEFAULT 0;
