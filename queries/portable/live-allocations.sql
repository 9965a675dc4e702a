-- Every allocation occupying memory at one snapshot, largest first: what is taking the space?
--
-- The portable form of queries/live-allocations.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param top          limit     at most this many allocations (default 20)
--
-- @column handle      id     the memory
-- @column uid         id     the allocation (never reused within the run)
-- @column kind        text   instance, deferred_buffer, future, pool, ...
-- @column state       text   valid, collectable, pending_free or pending_alloc
-- @column offset      offset where it starts in the memory
-- @column size        bytes  its length
-- @column provenance  text   where the program asked for it
-- @column label       text   its short name, if any
SELECT a.memory AS handle, a.uid, a.kind, a.state, a.offset, a.size, a.provenance, a.label
FROM allocation_spans a
WHERE a.run = :snapshot_run AND a.node = :snapshot_node
  AND a.first_seq <= :snapshot_seq AND :snapshot_seq <= a.last_seq
ORDER BY a.size DESC, a.memory, a.offset, a.uid
LIMIT :top;
