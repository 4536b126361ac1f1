-- An event row no longer carries a foreign key to its session. The key's
-- check ran once per inserted event (an internal query locking the session
-- row: 11 a scripted tool turn, each append's first one also writing a lock
-- record), to confirm what the statements writing events already ensure:
-- an append inserts its events from its own UPDATE of the session row
-- (store/append.ts), a fork and an import insert the session row first in
-- the same transaction (store/forks.ts, store/recordings.ts). Deletion, which
-- the key's ON DELETE CASCADE did, deletes the events itself
-- (store/deletion.ts), under the session row's lock that appends queue on.
ALTER TABLE "Event" DROP CONSTRAINT "Event_sessionId_treeId_fkey";
