-- Live bytes of one snapshot by call-stack frame: the numbers behind a flame graph.
--
-- The portable form of queries/live-by-frame.sql, for the Parquet dataset of `memstate export`
-- once it holds call stacks: it reads `allocation_spans` with a `stack` column (the stack's
-- frames as text) and a `stack_frames` table (stack, depth, file, line, name). `memstate export`
-- does not write stacks yet (issue 60 says what is left), so the Parquet runner has no data for
-- it; the columns and rows it gives are those of the canned form.
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param memory_id    memory    the memory (memories.memory_id), or every memory of the snapshot (default all)
--
-- @column frame             text   FILE:LINE NAME (the line or name left out when the dump gives none)
-- @column bytes             bytes  bytes of the allocations whose stack holds the frame
-- @column self_bytes        bytes  bytes of the allocations whose innermost frame it is
-- @column allocation_count  count  allocations whose stack holds the frame
WITH live AS (
    SELECT a.stack, sum(a.size) AS bytes, count(*) AS allocation_count
    FROM allocation_spans a
    WHERE a.run = :snapshot_run AND a.node = :snapshot_node
      AND a.first_seq <= :snapshot_seq AND :snapshot_seq <= a.last_seq
      AND (:memory IS NULL OR a.memory = :memory)
      AND a.stack IS NOT NULL
    GROUP BY a.stack
),
frame_of AS (
    SELECT DISTINCT f.run, f.stack, f.depth,
           f.file || coalesce(':' || CAST(f.line AS VARCHAR), '') || coalesce(' ' || f.name, '') AS frame
    FROM stack_frames f
    WHERE f.run = :snapshot_run
),
held AS (
    SELECT DISTINCT l.stack, f.frame FROM live l JOIN frame_of f ON f.stack = l.stack
),
inclusive AS (
    SELECT h.frame, sum(l.bytes) AS bytes, sum(l.allocation_count) AS allocation_count
    FROM held h JOIN live l ON l.stack = h.stack
    GROUP BY h.frame
),
innermost AS (
    SELECT f.frame, sum(l.bytes) AS bytes
    FROM live l JOIN frame_of f ON f.stack = l.stack AND f.depth = 0
    GROUP BY f.frame
)
SELECT i.frame,
       i.bytes,
       coalesce(s.bytes, 0) AS self_bytes,
       i.allocation_count
FROM inclusive i
LEFT JOIN innermost s ON s.frame = i.frame
ORDER BY i.bytes DESC, self_bytes DESC, i.frame;
