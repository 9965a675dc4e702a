-- The figures of every memory of a run across its snapshots, in time order: how free space,
-- the largest hole and fragmentation evolved up to the end (or the out-of-memory error).
--
-- The portable form of queries/fragmentation-trend.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- @param run  run   the run (runs.run)
--
-- @column node                 integer       the node
-- @column handle               id       the memory
-- @column kind                 text     the memory's kind
-- @column seq                  count    the snapshot's sequence number on its node
-- @column time_s               seconds  time since the run started
-- @column used_bytes           bytes    bytes covered by allocations
-- @column free_bytes           bytes    bytes in holes
-- @column hole_count           count    holes
-- @column largest_hole         bytes    the largest hole
-- @column fragmentation        ratio    1 - largest_hole / free_bytes
-- @column reclaimable_bytes    bytes    collectable and pending_free bytes
-- @column largest_reclaimable  bytes    the largest hole collection and pending releases could make
SELECT t.node, t.memory AS handle, m.kind, t.seq, s.time_s, t.used_bytes, t.free_bytes, t.hole_count,
       t.largest_hole, t.fragmentation, t.reclaimable_bytes, t.largest_reclaimable
FROM memory_stats t
JOIN snapshots s ON s.run = t.run AND s.node = t.node AND s.seq = t.seq
JOIN memories m ON m.run = t.run AND m.node = t.node AND m.memory = t.memory
WHERE t.run = :run
ORDER BY t.node, handle, t.seq;
