-- For each pair of consecutive snapshots of a node: how many allocations appeared and
-- disappeared (by uid), and their bytes. High churn with a falling largest hole is fragmentation
-- in the making. An allocation that only changed (state, place, size) neither appears nor
-- disappears. Reads the spans: a span starting at a snapshot is an appearance unless the uid's
-- previous span ended at the snapshot just before; a span ending is a disappearance unless the
-- uid's next span starts at the snapshot just after. Like growth, it reads memstate's private
-- span table with integer ids (an open span's last_seq is NULL there, and ends nothing).
--
-- @param run  text  the run (runs.run)
--
-- @column node               id     the node
-- @column from_seq           count  the earlier snapshot
-- @column to_seq             count  the later snapshot
-- @column appeared           count  allocations in the later snapshot but not the earlier
-- @column appeared_bytes     bytes  their total size
-- @column disappeared        count  allocations in the earlier snapshot but not the later
-- @column disappeared_bytes  bytes  their total size
WITH ordered AS (
    SELECT s.run_id, s.node, s.seq,
           lag(s.seq) OVER (PARTITION BY s.node ORDER BY s.seq) AS previous_seq,
           lead(s.seq) OVER (PARTITION BY s.node ORDER BY s.seq) AS next_seq
    FROM snapshot s
    WHERE s.run_id = (SELECT r.id FROM run r WHERE r.name = :run)
),
spans AS (
    SELECT m.node, a.first_seq, a.last_seq, a.size,
           lag(a.last_seq) OVER (PARTITION BY m.node, a.uid ORDER BY a.first_seq) AS before_last_seq,
           lead(a.first_seq) OVER (PARTITION BY m.node, a.uid ORDER BY a.first_seq) AS after_first_seq
    FROM memory m
    JOIN allocation_span a ON a.memory_id = m.id
    WHERE m.run_id = (SELECT r.id FROM run r WHERE r.name = :run)
),
appeared AS (
    SELECT s.node, s.first_seq AS seq, count(*) AS allocations, sum(s.size) AS bytes
    FROM spans s
    JOIN ordered o ON o.node = s.node AND o.seq = s.first_seq
    WHERE o.previous_seq IS NOT NULL AND (s.before_last_seq IS NULL OR s.before_last_seq <> o.previous_seq)
    GROUP BY s.node, s.first_seq
),
disappeared AS (
    SELECT s.node, o.next_seq AS seq, count(*) AS allocations, sum(s.size) AS bytes
    FROM spans s
    JOIN ordered o ON o.node = s.node AND o.seq = s.last_seq
    WHERE o.next_seq IS NOT NULL AND (s.after_first_seq IS NULL OR s.after_first_seq <> o.next_seq)
    GROUP BY s.node, o.next_seq
)
SELECT o.node,
       o.previous_seq AS from_seq,
       o.seq AS to_seq,
       coalesce(a.allocations, 0) AS appeared,
       coalesce(a.bytes, 0) AS appeared_bytes,
       coalesce(d.allocations, 0) AS disappeared,
       coalesce(d.bytes, 0) AS disappeared_bytes
FROM ordered o
LEFT JOIN appeared a ON a.node = o.node AND a.seq = o.seq
LEFT JOIN disappeared d ON d.node = o.node AND d.seq = o.seq
WHERE o.previous_seq IS NOT NULL
ORDER BY o.node, o.seq;
