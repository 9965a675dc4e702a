-- Allocations of one snapshot grouped by state: count and bytes, largest first, with each group's
-- share of all allocated bytes of the snapshot.
--
-- The portable form of queries/usage-by-state.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- Sizes are summed in two halves (high and low 32 bits) and put together: exact while the total
-- fits in 64 bits, a real number beyond (sizes reach 2^63 - 1, and SQLite's sum() stops with
-- "integer overflow" past that).
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
--
-- @column state             text   the state (NULL when the dumps gave none)
-- @column allocation_count  count  allocations in the group
-- @column bytes             bytes  their total size
-- @column share             ratio  bytes / all allocated bytes of the snapshot (0 to 1)
WITH live AS (
    SELECT a.state, a.size
    FROM allocation_spans a
    WHERE a.run = :snapshot_run AND a.node = :snapshot_node
      AND a.first_seq <= :snapshot_seq AND :snapshot_seq <= a.last_seq
),
everything AS (
    SELECT CAST(sum(CAST(size AS DECIMAL(38, 0))) AS DOUBLE) AS total FROM live
)
SELECT l.state,
       count(*) AS allocation_count,
       sum(CAST(l.size AS DECIMAL(38, 0))) AS bytes,
       CAST(sum(CAST(l.size AS DECIMAL(38, 0))) AS DOUBLE) / NULLIF(max(e.total), 0) AS share
FROM live l CROSS JOIN everything e
GROUP BY l.state
ORDER BY bytes DESC, l.state ASC NULLS FIRST;
