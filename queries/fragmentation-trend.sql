-- The figures of every memory of a run across its snapshots, in time order: how free space,
-- the largest hole and fragmentation evolved up to the end (or the out-of-memory error).
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
SELECT node, handle, kind, seq, time_s, used_bytes, free_bytes, hole_count, largest_hole,
       fragmentation, reclaimable_bytes, largest_reclaimable
FROM memory_trend
WHERE run = :run
ORDER BY node, handle, seq;
