-- CreateSchema
CREATE SCHEMA IF NOT EXISTS "public";

-- CreateEnum
CREATE TYPE "SessionStatus" AS ENUM ('IDLE', 'RUNNING');

-- CreateTable
CREATE TABLE "Session" (
    "id" TEXT NOT NULL,
    "tenant" TEXT NOT NULL DEFAULT 'local',
    "title" TEXT,
    "status" "SessionStatus" NOT NULL DEFAULT 'IDLE',
    "formatVersion" INTEGER NOT NULL DEFAULT 4,
    "eventCount" INTEGER NOT NULL DEFAULT 0,
    "turnCount" INTEGER NOT NULL DEFAULT 0,
    "parentId" TEXT,
    "forkedAtSeq" INTEGER,
    "inheritedEventCount" INTEGER NOT NULL DEFAULT 0,
    "firstLiveSeq" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Session_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "Event" (
    "id" TEXT NOT NULL,
    "sessionId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "type" TEXT NOT NULL,
    "data" JSONB NOT NULL,
    "inherited" BOOLEAN NOT NULL DEFAULT false,
    "synthetic" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "Event_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "Session_tenant_createdAt_id_idx" ON "Session"("tenant", "createdAt" DESC, "id");

-- CreateIndex
CREATE INDEX "Session_parentId_createdAt_idx" ON "Session"("parentId", "createdAt");

-- CreateIndex
CREATE INDEX "Event_sessionId_type_seq_idx" ON "Event"("sessionId", "type", "seq");

-- CreateIndex
CREATE UNIQUE INDEX "Event_sessionId_seq_key" ON "Event"("sessionId", "seq");

-- AddForeignKey
ALTER TABLE "Session" ADD CONSTRAINT "Session_parentId_fkey" FOREIGN KEY ("parentId") REFERENCES "Session"("id") ON DELETE SET NULL ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Event" ADD CONSTRAINT "Event_sessionId_fkey" FOREIGN KEY ("sessionId") REFERENCES "Session"("id") ON DELETE CASCADE ON UPDATE CASCADE;


-- Events are immutable (DESIGN §1): repairs append, nothing edits or deletes history.
-- Prisma migration runner splits statements at every semicolon, so the PL/pgSQL body
-- spells its semicolons as \x3B inside an escape string.
CREATE FUNCTION forkline_event_immutable() RETURNS trigger LANGUAGE plpgsql AS E'
BEGIN
  RAISE EXCEPTION ''forkline events are immutable (% on event %)'', TG_OP, OLD."id"\x3B
END';
CREATE TRIGGER "Event_immutable" BEFORE UPDATE OR DELETE ON "Event"
  FOR EACH ROW EXECUTE FUNCTION forkline_event_immutable();
