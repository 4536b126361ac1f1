-- Idempotency keys of mutations (issue 13): a retry after a lost response never
-- duplicates a fork or a message. Pruned after 24 hours by the service.

-- CreateTable
CREATE TABLE "IdempotencyKey" (
    "tenant" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "operation" TEXT NOT NULL,
    "requestHash" TEXT NOT NULL,
    "result" JSONB NOT NULL,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "IdempotencyKey_pkey" PRIMARY KEY ("tenant","key")
);
-- CreateIndex
CREATE INDEX "IdempotencyKey_createdAt_idx" ON "IdempotencyKey"("createdAt");
