-- A cancel of a session's running turn, kept on its row as the turnCount it was
-- asked at (store/leases.ts, docs/operations.md "The LISTEN connection"): the
-- process running the turn reads it with each lease renewal, so a cancel whose
-- notification its listener missed still stops the turn. Nullable, no default:
-- adding it rewrites nothing.
ALTER TABLE "Session" ADD COLUMN "cancelTurn" INTEGER;
