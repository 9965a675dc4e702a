-- Provenances whose live bytes (valid, collectable and pending_alloc allocations) grow across a
-- run, per node: leak suspects, the biggest growth first. Only provenances that grew are listed.
-- Reads the spans once: the live bytes of a provenance rise where its spans start and fall after
-- they end. The bytes starting and ending are summed per snapshot first (one sort of the spans),
-- then a running sum over those few rows gives the figure at every snapshot where something
-- changed: started up to it, less ended before it. The peak is one of those. It reads memstate's
-- private span table (with integer ids; texts only for the rows shown) rather than the
-- allocation_spans view, whose joins per span cost more than the whole question may take at 10
-- million allocation rows; it is released with the schema it reads.
--
-- The portable form of queries/growth.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- Sizes are summed in two halves (high and low 32 bits) and put together: exact while the total
-- fits in 64 bits, a real number beyond (sizes reach 2^63 - 1, and SQLite's sum() stops with
-- "integer overflow" past that).
--
-- @param run  run      the run (runs.run)
-- @param top  limit    at most this many rows (default 20)
--
-- @column node          integer     the node
-- @column provenance    text   where the program asked for the allocations
-- @column first_bytes   bytes  live bytes at the node's first snapshot
-- @column last_bytes    bytes  live bytes at the node's last snapshot
-- @column growth_bytes  bytes  last_bytes - first_bytes
-- @column peak_bytes    bytes  the most live bytes at any snapshot of the node
WITH nodes AS (
    SELECT s.node, min(s.seq) AS first_seq, max(s.seq) AS last_seq
    FROM snapshots s
    WHERE s.run = :run
    GROUP BY s.node
),
live AS (
    -- last_seq is the node's latest for spans still open, as the export writes it.
    SELECT a.node, a.provenance, a.first_seq, a.last_seq, CAST(a.size AS DECIMAL(38, 0)) AS size
    FROM allocation_spans a
    WHERE a.run = :run AND a.state IN ('valid', 'collectable', 'pending_alloc')
),
per_seq AS (
    SELECT node, provenance, seq, sum(starting) AS starting, sum(ending) AS ending
    FROM (SELECT node, provenance, first_seq AS seq, size AS starting, CAST(0 AS DECIMAL(38, 0)) AS ending FROM live
          UNION ALL
          SELECT node, provenance, last_seq AS seq, CAST(0 AS DECIMAL(38, 0)) AS starting, size AS ending FROM live) x
    GROUP BY node, provenance, seq
),
running AS (
    SELECT node, provenance, seq,
           sum(starting) OVER (PARTITION BY node, provenance ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             - sum(ending) OVER (PARTITION BY node, provenance ORDER BY seq ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
             + ending AS bytes
    FROM per_seq
),
figures AS (
    SELECT r.node, r.provenance,
           coalesce(max(CASE WHEN r.seq = n.first_seq THEN r.bytes END), 0) AS first_bytes,
           coalesce(max(CASE WHEN r.seq = n.last_seq THEN r.bytes END), 0) AS last_bytes,
           max(r.bytes) AS peak_bytes
    FROM running r JOIN nodes n ON n.node = r.node
    GROUP BY r.node, r.provenance
)
SELECT f.node,
       f.provenance,
       f.first_bytes,
       f.last_bytes,
       f.last_bytes - f.first_bytes AS growth_bytes,
       f.peak_bytes
FROM figures f
WHERE f.last_bytes - f.first_bytes > 0
ORDER BY growth_bytes DESC, f.node, f.provenance ASC NULLS FIRST
LIMIT :top;
