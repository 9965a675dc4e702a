-- For each pair of consecutive snapshots of a node: how many allocations appeared and
-- disappeared (by uid), and their bytes. High churn with a falling largest hole is fragmentation
-- in the making.
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
    SELECT snapshot_id, node, seq,
           lag(snapshot_id) OVER (PARTITION BY node ORDER BY seq) AS previous_id,
           lag(seq) OVER (PARTITION BY node ORDER BY seq) AS previous_seq
    FROM snapshots
    WHERE run = :run
)
SELECT o.node,
       o.previous_seq AS from_seq,
       o.seq AS to_seq,
       (SELECT count(*) FROM allocations n WHERE n.snapshot_id = o.snapshot_id
          AND n.uid NOT IN (SELECT uid FROM allocations p WHERE p.snapshot_id = o.previous_id)) AS appeared,
       (SELECT coalesce(sum(size), 0) FROM allocations n WHERE n.snapshot_id = o.snapshot_id
          AND n.uid NOT IN (SELECT uid FROM allocations p WHERE p.snapshot_id = o.previous_id)) AS appeared_bytes,
       (SELECT count(*) FROM allocations p WHERE p.snapshot_id = o.previous_id
          AND p.uid NOT IN (SELECT uid FROM allocations n WHERE n.snapshot_id = o.snapshot_id)) AS disappeared,
       (SELECT coalesce(sum(size), 0) FROM allocations p WHERE p.snapshot_id = o.previous_id
          AND p.uid NOT IN (SELECT uid FROM allocations n WHERE n.snapshot_id = o.snapshot_id)) AS disappeared_bytes
FROM ordered o
WHERE o.previous_id IS NOT NULL
ORDER BY o.node, o.seq;
