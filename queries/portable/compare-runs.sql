-- Two runs side by side, memory by memory (the rows `memstate compare A B` gives): each memory of
-- either run, matched by node, kind and place among the node's memories of that kind (by
-- handle), with its peak used, lowest largest hole, peak fragmentation and failed requests over
-- the run in A, in B, and the change from A to B. A memory one run does not have is empty on
-- that side.
--
-- The portable form of queries/compare-runs.sql: the same columns and rows, in the same order, from
-- the Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values).
--
-- @param a  run  the first run (A), before the change
-- @param b  run  the second run (B), after it
--
-- @column node                        integer  the node
-- @column kind                        text     the memory's kind
-- @column ordinal                     integer  its place among the node's memories of that kind, by handle (0 first)
-- @column handle_a                    id       the memory in A
-- @column handle_b                    id       the memory in B
-- @column peak_used_a                 bytes    the most bytes allocated at one snapshot of A
-- @column peak_used_b                 bytes    the same in B
-- @column peak_used_change            bytes    B minus A
-- @column lowest_largest_hole_a       bytes    the smallest largest hole at one snapshot of A
-- @column lowest_largest_hole_b       bytes    the same in B
-- @column lowest_largest_hole_change  bytes    B minus A
-- @column peak_fragmentation_a        ratio    the highest fragmentation at one snapshot of A
-- @column peak_fragmentation_b        ratio    the same in B
-- @column peak_fragmentation_change   ratio    B minus A
-- @column failed_requests_a           count    requests that failed on it in A
-- @column failed_requests_b           count    the same in B
-- @column failed_requests_change      count    B minus A
WITH stats AS (
    SELECT run, node, memory, max(used_bytes) AS peak_used, min(largest_hole) AS lowest_largest_hole,
           max(fragmentation) AS peak_fragmentation
    FROM memory_stats
    WHERE run IN (:a, :b)
    GROUP BY run, node, memory
),
failures AS (
    SELECT run, node, memory, count(*) AS failed_requests
    FROM failed_requests
    WHERE run IN (:a, :b)
    GROUP BY run, node, memory
),
per_memory AS (
    SELECT m.run, m.node, m.kind, m.memory AS handle,
           row_number() OVER (PARTITION BY m.run, m.node, m.kind ORDER BY m.memory) - 1 AS ordinal,
           s.peak_used, s.lowest_largest_hole, s.peak_fragmentation,
           coalesce(f.failed_requests, 0) AS failed_requests
    FROM memories m
    LEFT JOIN stats s ON s.run = m.run AND s.node = m.node AND s.memory = m.memory
    LEFT JOIN failures f ON f.run = m.run AND f.node = m.node AND f.memory = m.memory
    WHERE m.run IN (:a, :b)
),
keys AS (
    SELECT DISTINCT node, kind, ordinal FROM per_memory
)
SELECT k.node, k.kind, k.ordinal, a.handle AS handle_a, b.handle AS handle_b,
       a.peak_used AS peak_used_a, b.peak_used AS peak_used_b, b.peak_used - a.peak_used AS peak_used_change,
       a.lowest_largest_hole AS lowest_largest_hole_a, b.lowest_largest_hole AS lowest_largest_hole_b,
       b.lowest_largest_hole - a.lowest_largest_hole AS lowest_largest_hole_change,
       a.peak_fragmentation AS peak_fragmentation_a, b.peak_fragmentation AS peak_fragmentation_b,
       b.peak_fragmentation - a.peak_fragmentation AS peak_fragmentation_change,
       a.failed_requests AS failed_requests_a, b.failed_requests AS failed_requests_b,
       b.failed_requests - a.failed_requests AS failed_requests_change
FROM keys k
LEFT JOIN per_memory a ON a.run = :a AND a.node = k.node AND a.kind = k.kind AND a.ordinal = k.ordinal
LEFT JOIN per_memory b ON b.run = :b AND b.node = k.node AND b.kind = k.kind AND b.ordinal = k.ordinal
ORDER BY k.node, k.kind, k.ordinal;
