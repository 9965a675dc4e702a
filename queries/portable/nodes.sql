-- The latest figures of every node and memory of a run side by side: which node, which memory is
-- in trouble.
--
-- The portable form of queries/nodes.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- @param run  run   the run (runs.run)
--
-- @column node                 integer     the node
-- @column seq                  count  the node's latest snapshot
-- @column handle               id     the memory
-- @column kind                 text   the memory's kind
-- @column capacity             bytes  its size
-- @column used_bytes           bytes  bytes covered by allocations
-- @column free_bytes           bytes  bytes in holes
-- @column largest_hole         bytes  the largest hole
-- @column fragmentation        ratio  1 - largest_hole / free_bytes
-- @column reclaimable_bytes    bytes  collectable and pending_free bytes
-- @column largest_reclaimable  bytes  the largest hole collection and pending releases could make
WITH latest AS (
    SELECT s.node, max(s.seq) AS seq FROM snapshots s WHERE s.run = :run GROUP BY s.node
)
SELECT t.node, t.seq, t.memory AS handle, m.kind, t.capacity, t.used_bytes, t.free_bytes, t.largest_hole,
       t.fragmentation, t.reclaimable_bytes, t.largest_reclaimable
FROM memory_stats t
JOIN latest l ON l.node = t.node AND l.seq = t.seq
JOIN memories m ON m.run = t.run AND m.node = t.node AND m.memory = t.memory
WHERE t.run = :run
ORDER BY t.node, handle;
