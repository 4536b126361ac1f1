-- Session.totals through a seq (store/totals-checkpoints.ts, docs/long-sessions.md
-- "Session totals"): a read starts from the nearest checkpoint its log inherits
-- and sums only the events after it. Kept under the session that stores event
-- `seq` (like "FoldCheckpoint"), so forks use it too. Reads keep new ones; the
-- statement below keeps one for each existing log that forks nothing.
CREATE TABLE "TotalsCheckpoint" (
    "sessionId" TEXT NOT NULL,
    "treeId" TEXT NOT NULL,
    "seq" INTEGER NOT NULL,
    "turns" INTEGER NOT NULL,
    "endedTurns" INTEGER NOT NULL,
    "steps" INTEGER NOT NULL,
    "toolCalls" DOUBLE PRECISION NOT NULL,
    "inputTokens" DOUBLE PRECISION NOT NULL,
    "outputTokens" DOUBLE PRECISION NOT NULL,
    "costUsd" DOUBLE PRECISION,
    "spanMs" DOUBLE PRECISION NOT NULL,
    "lastStartMs" DOUBLE PRECISION NOT NULL,

    CONSTRAINT "TotalsCheckpoint_pkey" PRIMARY KEY ("sessionId","seq","treeId")
);

ALTER TABLE "TotalsCheckpoint" ADD CONSTRAINT "TotalsCheckpoint_sessionId_treeId_fkey" FOREIGN KEY ("sessionId", "treeId") REFERENCES "Session"("id", "treeId") ON DELETE CASCADE ON UPDATE CASCADE;

-- Existing logs of sessions that fork nothing (a fork's totals need its
-- lineage: its first read sums it once): one checkpoint each at its last turn
-- bracket or answer, the sums store/session-totals.ts makes, one aggregate per
-- session over the (sessionId, type, seq) index. A turn/end crash repair wrote
-- (synthetic, `interrupted`) ends at the last event written before its
-- closers, looked for among the 256 before it (store/crash-stop-times.ts). A
-- root has no turn a fork closed. 0.32 s for a database of 200,000 events.
INSERT INTO "TotalsCheckpoint" ("sessionId", "treeId", seq, turns, "endedTurns", steps, "toolCalls", "inputTokens", "outputTokens", "costUsd", "spanMs", "lastStartMs")
SELECT s.id, s."treeId", t.last_seq, t.starts, t.ends, t.steps, t.calls, t.input, t.output,
       CASE WHEN t.costed > 0 THEN round(t.cost, 9) END, t.span_ms - t.crash_ms, coalesce(t.last_start_ms, 0)
  FROM "Session" s
  CROSS JOIN LATERAL (
    SELECT count(*) FILTER (WHERE e.type = 'turn/start')::int AS starts, count(*) FILTER (WHERE e.type = 'turn/end')::int AS ends,
           count(*) FILTER (WHERE e.type = 'model/message')::int AS steps,
           coalesce(sum(jsonb_array_length(a->'toolCalls')), 0) AS calls,
           coalesce(sum((a->'usage'->>'inputTokens')::numeric), 0) AS input, coalesce(sum((a->'usage'->>'outputTokens')::numeric), 0) AS output,
           coalesce(sum((a->'usage'->>'costUsd')::numeric), 0) AS cost, count(a->'usage'->'costUsd') AS costed,
           coalesce(sum(round(extract(epoch from e."createdAt") * 1000)) FILTER (WHERE e.type = 'turn/end'), 0)
             - coalesce(sum(round(extract(epoch from e."createdAt") * 1000)) FILTER (WHERE e.type = 'turn/start'), 0) AS span_ms,
           coalesce(sum(round(extract(epoch from e."createdAt") * 1000) - round(extract(epoch from stopped."createdAt") * 1000))
             FILTER (WHERE stopped."createdAt" IS NOT NULL), 0) AS crash_ms,
           max(round(extract(epoch from e."createdAt") * 1000)) FILTER (WHERE e.type = 'turn/start') AS last_start_ms,
           max(e.seq) AS last_seq
      FROM "Event" e
      CROSS JOIN LATERAL (SELECT CASE WHEN e.type = 'model/message' THEN e.data - 'text' END AS a OFFSET 0) answer
      LEFT JOIN LATERAL (
        SELECT p."createdAt" FROM "Event" p
         WHERE e.type = 'turn/end' AND e.synthetic AND e.data->>'reason' = 'interrupted'
           AND p."treeId" = e."treeId" AND p."sessionId" = e."sessionId" AND p.seq BETWEEN e.seq - 256 AND e.seq - 1 AND NOT p.synthetic
         ORDER BY p.seq DESC LIMIT 1
      ) stopped ON true
     WHERE e."treeId" = s."treeId" AND e."sessionId" = s.id AND e.type IN ('turn/start', 'turn/end', 'model/message')
  ) t
 WHERE jsonb_array_length(s."inheritedRanges") = 0 AND t.last_seq IS NOT NULL
ON CONFLICT DO NOTHING;
