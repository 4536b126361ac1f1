-- The event key puts the session's tree before seq: (sessionId, treeId, seq).
-- Every read of the log names the session and its tree and asks for a range
-- of seqs (store/session-log.ts). With treeId after seq, Postgres 18 priced
-- that range as one index descent per seq (a skip array over seq, to reach the
-- treeId condition behind it) and chose (sessionId, type, seq) with a sort
-- instead: a page of 100 read about 80 buffers rather than 9, and took about
-- twice the time. With both equalities first the range is one scan of the key.
ALTER TABLE "Event" DROP CONSTRAINT "Event_pkey",
ADD CONSTRAINT "Event_pkey" PRIMARY KEY ("sessionId", "treeId", "seq");
