-- File contents stored once per tenant, no longer once for all tenants
-- (docs/files.md "Contents are stored once per tenant"): a tenant writing a
-- content another tenant held skipped the write (ON CONFLICT DO NOTHING), so
-- the work, and the time, of its request told whether anyone else held it.
-- FileBlob, FileChunk and FileBlobChunk gain the tenant, in their keys. Each
-- tenant some session of which stores a content (SessionBlob) gets its own
-- copy: the existing row goes to one of them (its TOAST stays where it is),
-- the others get copies; a big content's chunk list and chunks likewise. A
-- blob no session stores (its sessions deleted, its reclaim not yet done) is
-- deleted here with the chunks only it held, as that reclaim would have.

-- Blobs no session stores, and chunks no remaining blob holds.
DELETE FROM "FileBlob" b WHERE NOT EXISTS (SELECT 1 FROM "SessionBlob" r WHERE r.hash = b.hash);
DELETE FROM "FileChunk" c WHERE NOT EXISTS (SELECT 1 FROM "FileBlobChunk" l WHERE l."chunkHash" = c.hash);

ALTER TABLE "SessionBlob" DROP CONSTRAINT "SessionBlob_hash_fkey";
ALTER TABLE "FileBlobChunk" DROP CONSTRAINT "FileBlobChunk_blobHash_fkey";
ALTER TABLE "FileBlobChunk" DROP CONSTRAINT "FileBlobChunk_chunkHash_fkey";
ALTER TABLE "FileBlob" DROP CONSTRAINT "FileBlob_pkey";
ALTER TABLE "FileChunk" DROP CONSTRAINT "FileChunk_pkey";
ALTER TABLE "FileBlobChunk" DROP CONSTRAINT "FileBlobChunk_pkey";
DROP INDEX "FileBlobChunk_chunkHash_idx";
DROP INDEX "SessionBlob_hash_idx";

ALTER TABLE "FileBlob" ADD COLUMN "tenant" TEXT;
ALTER TABLE "FileChunk" ADD COLUMN "tenant" TEXT;
ALTER TABLE "FileBlobChunk" ADD COLUMN "tenant" TEXT;

-- The tenants holding each content.
CREATE TEMPORARY TABLE held_by ON COMMIT DROP AS SELECT DISTINCT tenant, hash FROM "SessionBlob";
CREATE INDEX ON held_by (hash, tenant);

UPDATE "FileBlob" b SET tenant = (SELECT min(h.tenant) FROM held_by h WHERE h.hash = b.hash);
INSERT INTO "FileBlob" (tenant, hash, size, content, "createdAt")
SELECT h.tenant, b.hash, b.size, b.content, b."createdAt" FROM "FileBlob" b JOIN held_by h ON h.hash = b.hash AND h.tenant <> b.tenant;

-- A big content's chunk list, for every tenant holding the content.
UPDATE "FileBlobChunk" l SET tenant = (SELECT min(h.tenant) FROM held_by h WHERE h.hash = l."blobHash");
INSERT INTO "FileBlobChunk" (tenant, "blobHash", idx, "chunkHash")
SELECT h.tenant, l."blobHash", l.idx, l."chunkHash" FROM "FileBlobChunk" l JOIN held_by h ON h.hash = l."blobHash" AND h.tenant <> l.tenant;

-- Each chunk, for every tenant whose chunk lists name it.
CREATE TEMPORARY TABLE chunk_held_by ON COMMIT DROP AS SELECT DISTINCT tenant, "chunkHash" AS hash FROM "FileBlobChunk";
CREATE INDEX ON chunk_held_by (hash, tenant);
UPDATE "FileChunk" c SET tenant = (SELECT min(h.tenant) FROM chunk_held_by h WHERE h.hash = c.hash);
INSERT INTO "FileChunk" (tenant, hash, size, content)
SELECT h.tenant, c.hash, c.size, c.content FROM "FileChunk" c JOIN chunk_held_by h ON h.hash = c.hash AND h.tenant <> c.tenant;

ALTER TABLE "FileBlob" ALTER COLUMN "tenant" SET NOT NULL;
ALTER TABLE "FileChunk" ALTER COLUMN "tenant" SET NOT NULL;
ALTER TABLE "FileBlobChunk" ALTER COLUMN "tenant" SET NOT NULL;

ALTER TABLE "FileBlob" ADD CONSTRAINT "FileBlob_pkey" PRIMARY KEY ("tenant", "hash");
ALTER TABLE "FileChunk" ADD CONSTRAINT "FileChunk_pkey" PRIMARY KEY ("tenant", "hash");
ALTER TABLE "FileBlobChunk" ADD CONSTRAINT "FileBlobChunk_pkey" PRIMARY KEY ("tenant", "blobHash", "idx");
CREATE INDEX "FileBlobChunk_tenant_chunkHash_idx" ON "FileBlobChunk"("tenant", "chunkHash");

ALTER TABLE "SessionBlob" ADD CONSTRAINT "SessionBlob_tenant_hash_fkey" FOREIGN KEY ("tenant", "hash") REFERENCES "FileBlob"("tenant", "hash") ON DELETE NO ACTION ON UPDATE CASCADE;
ALTER TABLE "FileBlobChunk" ADD CONSTRAINT "FileBlobChunk_tenant_blobHash_fkey" FOREIGN KEY ("tenant", "blobHash") REFERENCES "FileBlob"("tenant", "hash") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "FileBlobChunk" ADD CONSTRAINT "FileBlobChunk_tenant_chunkHash_fkey" FOREIGN KEY ("tenant", "chunkHash") REFERENCES "FileChunk"("tenant", "hash") ON DELETE NO ACTION ON UPDATE CASCADE;
