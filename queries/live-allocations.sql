-- Every allocation occupying memory at one snapshot, largest first: what is taking the space?
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
SELECT m.handle, a.uid, a.kind, a.state, a.offset, a.size, a.provenance, a.label
FROM allocations a
JOIN memories m ON m.memory_id = a.memory_id
WHERE a.snapshot_id = :snapshot_id
ORDER BY a.size DESC, m.handle, a.offset, a.uid
LIMIT :top;
