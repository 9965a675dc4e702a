-- Holes of one memory at one snapshot, largest first, with a running total and each hole's
-- share of the memory's free bytes: where could a request go, and how scattered is the rest?
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param memory_id    memory    the memory (memories.memory_id)
-- @param top          limit     at most this many holes (default 10)
--
-- @column offset         offset where the hole starts
-- @column size           bytes  the hole's length
-- @column running_total  bytes  this hole's size plus the sizes of the holes listed before it
-- @column share_of_free  ratio  size / the memory's free bytes at that snapshot (0 to 1)
SELECT h.offset,
       h.size,
       sum(h.size) OVER (ORDER BY h.size DESC, h.offset ROWS UNBOUNDED PRECEDING) AS running_total,
       CAST(h.size AS REAL) / m.free_bytes AS share_of_free
FROM holes h
JOIN memory_stats m ON m.snapshot_id = h.snapshot_id AND m.memory_id = h.memory_id
WHERE h.snapshot_id = :snapshot_id AND h.memory_id = :memory_id
ORDER BY h.size DESC, h.offset
LIMIT :top;
