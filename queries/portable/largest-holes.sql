-- Holes of one memory at one snapshot, largest first, with a running total and each hole's
-- share of the memory's free bytes: where could a request go, and how scattered is the rest?
--
-- The portable form of queries/largest-holes.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param memory_id    memory    the memory (memories.memory_id)
-- @param top          limit     at most this many holes (default 10)
--
-- @column offset         offset where the hole starts
-- @column size           bytes  the hole's length
-- @column running_total  bytes  this hole's size plus the sizes of the holes listed before it
-- @column share_of_free  ratio  size / the memory's free bytes at that snapshot (0 to 1)
WITH holes AS (
    SELECT h.offset, h.size
    FROM hole_spans h
    WHERE h.run = :snapshot_run AND h.node = :snapshot_node AND h.memory = :memory
      AND h.first_seq <= :snapshot_seq AND :snapshot_seq <= h.last_seq
),
figures AS (
    SELECT s.free_bytes
    FROM memory_stats s
    WHERE s.run = :snapshot_run AND s.node = :snapshot_node AND s.seq = :snapshot_seq AND s.memory = :memory
)
SELECT h.offset,
       h.size,
       sum(h.size) OVER (ORDER BY h.size DESC, h.offset ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running_total,
       CAST(h.size AS DOUBLE) / NULLIF(f.free_bytes, 0) AS share_of_free
FROM holes h CROSS JOIN figures f
ORDER BY h.size DESC, h.offset
LIMIT :top;
