-- Session leases as row state instead of one advisory-lock connection per
-- running session (DESIGN §6, store/leases.ts): a process's connections are
-- bounded by its pool, leases work behind a transaction-mode pooler, and the
-- fencing token makes a stale runner's appends fail. No index on the lease
-- columns: leases are found by session id, and updates of unindexed columns
-- stay HOT (a claim, a renewal or a release touches no index).

-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "leaseExpiresAt" TIMESTAMPTZ(3),
ADD COLUMN     "leaseOwner" TEXT,
ADD COLUMN     "leaseToken" INTEGER NOT NULL DEFAULT 0;
