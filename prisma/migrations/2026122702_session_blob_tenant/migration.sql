-- Which contents a tenant holds (store/file-blobs.ts `heldBy`), answered from
-- that tenant's own rows: the lookup went from a content to every session of
-- every tenant holding it, so naming a content many sessions of another tenant
-- hold took tens of milliseconds and naming one nobody holds a fraction of one
-- (docs/files.md "Recordings": contents belong to tenants). A session's tenant never changes,
-- and its rows here go with it (the foreign key cascades).
ALTER TABLE "SessionBlob" ADD COLUMN "tenant" TEXT;
UPDATE "SessionBlob" b SET "tenant" = s.tenant FROM "Session" s WHERE s.id = b."sessionId" AND s."treeId" = b."treeId";
ALTER TABLE "SessionBlob" ALTER COLUMN "tenant" SET NOT NULL;
CREATE INDEX "SessionBlob_tenant_hash_idx" ON "SessionBlob"("tenant", "hash");
