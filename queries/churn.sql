-- For each pair of consecutive snapshots of a node: how many allocations appeared and
-- disappeared (by uid), and their bytes. High churn with a falling largest hole is fragmentation
-- in the making. An allocation that only changed (state, place, size) neither appears nor
-- disappears.
--
-- Reads the spans: a span starting at a snapshot (not a node's first) is an
-- appearance unless the same uid has a span ending just before it; a span ending before a later
-- snapshot is a disappearance unless the same uid has a span starting there. Set lookups, not
-- window functions: SQLite's lag/lead over one small partition per uid cost about 2 us a span.
-- Like growth, it reads memstate's private span table with integer ids (an open span's last_seq
-- is NULL there, and ends nothing).
--
-- Sizes are summed in two halves (high and low 32 bits) and put together: exact while the total
-- fits in 64 bits, a real number beyond (sizes reach 2^63 - 1, and SQLite's sum() stops with
-- "integer overflow" past that).
--
-- @param run  run   the run (runs.run)
--
-- @column node               integer     the node
-- @column from_seq           count  the earlier snapshot
-- @column to_seq             count  the later snapshot
-- @column appeared           count  allocations in the later snapshot but not the earlier
-- @column appeared_bytes     bytes  their total size
-- @column disappeared        count  allocations in the earlier snapshot but not the later
-- @column disappeared_bytes  bytes  their total size
WITH ordered AS (
    SELECT s.node, s.seq,
           lag(s.seq) OVER (PARTITION BY s.node ORDER BY s.seq) AS previous_seq,
           lead(s.seq) OVER (PARTITION BY s.node ORDER BY s.seq) AS next_seq
    FROM snapshot s
    WHERE s.run_id = (SELECT r.id FROM run r WHERE r.name = :run)
),
starts AS MATERIALIZED (
    SELECT m.node, a.uid, a.first_seq AS seq, a.size
    FROM memory m
    JOIN allocation_span a ON a.memory_id = m.id
    JOIN ordered o ON o.node = m.node AND o.seq = a.first_seq
    WHERE m.run_id = (SELECT r.id FROM run r WHERE r.name = :run) AND o.previous_seq IS NOT NULL
),
ends AS MATERIALIZED (
    SELECT m.node, a.uid, CAST(o.next_seq AS INTEGER) AS seq, a.size
    FROM memory m
    JOIN allocation_span a ON a.memory_id = m.id
    JOIN ordered o ON o.node = m.node AND o.seq = a.last_seq
    WHERE m.run_id = (SELECT r.id FROM run r WHERE r.name = :run) AND o.next_seq IS NOT NULL
),
appeared AS MATERIALIZED (
    SELECT n.node, n.seq, count(*) AS allocations, (sum(n.size >> 32) * 4294967296 + sum(n.size & 4294967295)) AS bytes
    FROM starts n
    WHERE NOT EXISTS (SELECT 1 FROM ends e WHERE e.node = n.node AND e.uid = n.uid AND e.seq = n.seq)
    GROUP BY n.node, n.seq
),
disappeared AS MATERIALIZED (
    SELECT e.node, e.seq, count(*) AS allocations, (sum(e.size >> 32) * 4294967296 + sum(e.size & 4294967295)) AS bytes
    FROM ends e
    WHERE NOT EXISTS (SELECT 1 FROM starts n WHERE n.node = e.node AND n.uid = e.uid AND n.seq = e.seq)
    GROUP BY e.node, e.seq
)
SELECT o.node,
       o.previous_seq AS from_seq,
       o.seq AS to_seq,
       coalesce((SELECT ap.allocations FROM appeared ap WHERE ap.node = o.node AND ap.seq = o.seq), 0) AS appeared,
       coalesce((SELECT ap.bytes FROM appeared ap WHERE ap.node = o.node AND ap.seq = o.seq), 0) AS appeared_bytes,
       coalesce((SELECT di.allocations FROM disappeared di WHERE di.node = o.node AND di.seq = o.seq), 0) AS disappeared,
       coalesce((SELECT di.bytes FROM disappeared di WHERE di.node = o.node AND di.seq = o.seq), 0) AS disappeared_bytes
FROM ordered o
WHERE o.previous_seq IS NOT NULL
ORDER BY o.node, o.seq;
