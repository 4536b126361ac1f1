-- Titles are searched in a table of their own (store/session-search.ts), not
-- through an expression index on "Session": every append updates the session
-- row (its counters, "updatedAt"), and an update that changes an indexed
-- column writes a new entry into every index of the row, so the title's
-- tsvector was computed again and inserted into the GIN index at each append
-- (five times a turn; docs/benchmarks.md "Statements per turn"). The title
-- changes far more rarely: a trigger keeps this table in step with the
-- session rows, and the session's appends do not touch it (the trigger's
-- WHEN compares the titles; an append that sets none leaves it unchanged).
CREATE TABLE "SessionTitle" (
    "sessionId" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,
    "title" TEXT NOT NULL,

    CONSTRAINT "SessionTitle_pkey" PRIMARY KEY ("sessionId", "treeId"),
    CONSTRAINT "SessionTitle_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE
);

-- The expression store/session-search.ts repeats exactly. No pending list, as
-- before: a title changes at most once a turn, and a page of hits looks them up once per hit.
CREATE INDEX "SessionTitle_search_idx" ON "SessionTitle" USING GIN (to_tsvector('english'::regconfig, left(title, 100000)))
  WITH (fastupdate = off);

CREATE FUNCTION forkline_session_title() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    DELETE FROM "SessionTitle" WHERE "sessionId" = OLD.id AND "treeId" = OLD."treeId";
  END IF;
  IF NEW.title IS NOT NULL THEN
    INSERT INTO "SessionTitle" ("sessionId", "treeId", title) VALUES (NEW.id, NEW."treeId", NEW.title)
      ON CONFLICT ("sessionId", "treeId") DO UPDATE SET title = EXCLUDED.title;
  END IF;
  RETURN NULL;
END $$;

CREATE TRIGGER "Session_title_insert" AFTER INSERT ON "Session"
  FOR EACH ROW WHEN (NEW.title IS NOT NULL) EXECUTE FUNCTION forkline_session_title();
CREATE TRIGGER "Session_title_update" AFTER UPDATE OF title ON "Session"
  FOR EACH ROW WHEN (OLD.title IS DISTINCT FROM NEW.title) EXECUTE FUNCTION forkline_session_title();

INSERT INTO "SessionTitle" ("sessionId", "treeId", title) SELECT id, "treeId", title FROM "Session" WHERE title IS NOT NULL;

DROP INDEX "Session_title_search_idx";
