-- Session leases as row state instead of one advisory-lock connection per
-- running session (DESIGN §6, store/leases.ts): a process's connections are
-- bounded by its pool, leases work behind a transaction-mode pooler, and the
-- fencing token makes a stale runner's appends fail.

-- AlterTable
ALTER TABLE "Session" ADD COLUMN     "leaseExpiresAt" TIMESTAMPTZ(3),
ADD COLUMN     "leaseOwner" TEXT,
ADD COLUMN     "leaseToken" INTEGER NOT NULL DEFAULT 0;

-- CreateIndex
CREATE INDEX "Session_leaseOwner_idx" ON "Session"("leaseOwner");
