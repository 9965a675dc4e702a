-- Two runs side by side, memory by memory (the rows `memstate compare A B` gives): each memory of
-- either run, matched by node, kind and place among the node's memories of that kind (by
-- handle), with its peak used, lowest largest hole, peak fragmentation and failed requests over
-- the run in A, in B, and the change from A to B. A memory one run does not have is empty on
-- that side.
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
WITH per_memory AS (
    SELECT m.run, m.node, m.kind, m.handle,
           row_number() OVER (PARTITION BY m.run, m.node, m.kind ORDER BY m.handle) - 1 AS ordinal,
           (SELECT max(ms.used_bytes) FROM memory_stats ms WHERE ms.memory_id = m.memory_id) AS peak_used,
           (SELECT min(ms.largest_hole) FROM memory_stats ms WHERE ms.memory_id = m.memory_id) AS lowest_largest_hole,
           (SELECT max(ms.fragmentation) FROM memory_stats ms WHERE ms.memory_id = m.memory_id) AS peak_fragmentation,
           (SELECT count(*) FROM failed_requests f WHERE f.memory_id = m.memory_id) AS failed_requests
    FROM memories m
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
