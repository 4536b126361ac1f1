-- The size of an event's data as written (its jsonb's bytes before any
-- compression): reads that page by count also stop at a byte budget
-- (store/session-log.ts PAGE_BYTES), measured before the data is read. Null on
-- rows written before this column: they are measured by their stored size.
-- A nullable column without a default: no rewrite of the table.
ALTER TABLE "Event" ADD COLUMN "dataBytes" INTEGER;
