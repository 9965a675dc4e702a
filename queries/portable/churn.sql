-- For each pair of consecutive snapshots of a node: how many allocations appeared and
-- disappeared (by uid), and their bytes. High churn with a falling largest hole is fragmentation
-- in the making. An allocation that only changed (state, place, size) neither appears nor
-- disappears. Reads the spans: a span starting at a snapshot (not a node's first) is an
-- appearance unless the same uid has a span ending just before it; a span ending before a later
-- snapshot is a disappearance unless the same uid has a span starting there. Set lookups, not
-- window functions: SQLite's lag/lead over one small partition per uid cost about 2 us a span.
-- Like growth, it reads memstate's private span table with integer ids (an open span's last_seq
-- is NULL there, and ends nothing).
--
-- The portable form of queries/churn.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
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
    FROM snapshots s
    WHERE s.run = :run
),
starts AS (
    -- A span that begins after the node's first snapshot.
    SELECT a.node, a.uid, a.first_seq AS seq, a.size
    FROM allocation_spans a
    JOIN ordered o ON o.node = a.node AND o.seq = a.first_seq
    WHERE a.run = :run AND o.previous_seq IS NOT NULL
),
ends AS (
    -- A span that ends before the node's latest snapshot, at the snapshot after its last.
    SELECT a.node, a.uid, o.next_seq AS seq, a.size
    FROM allocation_spans a
    JOIN ordered o ON o.node = a.node AND o.seq = a.last_seq
    WHERE a.run = :run AND o.next_seq IS NOT NULL
),
appeared AS (
    SELECT n.node, n.seq, count(*) AS allocations, sum(CAST(n.size AS DECIMAL(38, 0))) AS bytes
    FROM starts n
    WHERE NOT EXISTS (SELECT 1 FROM ends e WHERE e.node = n.node AND e.uid = n.uid AND e.seq = n.seq)
    GROUP BY n.node, n.seq
),
disappeared AS (
    SELECT e.node, e.seq, count(*) AS allocations, sum(CAST(e.size AS DECIMAL(38, 0))) AS bytes
    FROM ends e
    WHERE NOT EXISTS (SELECT 1 FROM starts n WHERE n.node = e.node AND n.uid = e.uid AND n.seq = e.seq)
    GROUP BY e.node, e.seq
)
SELECT o.node,
       o.previous_seq AS from_seq,
       o.seq AS to_seq,
       coalesce(ap.allocations, 0) AS appeared,
       coalesce(ap.bytes, 0) AS appeared_bytes,
       coalesce(di.allocations, 0) AS disappeared,
       coalesce(di.bytes, 0) AS disappeared_bytes
FROM ordered o
LEFT JOIN appeared ap ON ap.node = o.node AND ap.seq = o.seq
LEFT JOIN disappeared di ON di.node = o.node AND di.seq = o.seq
WHERE o.previous_seq IS NOT NULL
ORDER BY o.node, o.seq;
