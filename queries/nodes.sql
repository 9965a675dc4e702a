-- The latest figures of every node and memory of a run side by side: which node, which memory is
-- in trouble.
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
SELECT t.node, t.seq, t.handle, t.kind, t.capacity, t.used_bytes, t.free_bytes, t.largest_hole,
       t.fragmentation, t.reclaimable_bytes, t.largest_reclaimable
FROM memory_trend t
WHERE t.run = :run
  AND t.seq = (SELECT max(s.seq) FROM snapshots s WHERE s.run = t.run AND s.node = t.node)
ORDER BY t.node, t.handle;
