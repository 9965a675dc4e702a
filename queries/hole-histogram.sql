-- Holes of one memory at one snapshot by power-of-two size class: many small holes and no big
-- one is what fragmentation looks like.
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param memory_id    memory    the memory (memories.memory_id)
--
-- @column size_class  bytes    the class's lower bound: holes of at least this size and below twice it
-- @column hole_count  count    holes in the class
-- @column bytes       bytes    their total size
WITH RECURSIVE power (size_class) AS (
    SELECT 1
    UNION ALL
    SELECT size_class * 2 FROM power WHERE size_class < 4611686018427387904
)
SELECT p.size_class,
       count(*) AS hole_count,
       sum(h.size) AS bytes
FROM holes h
JOIN power p ON h.size >= p.size_class AND (p.size_class = 4611686018427387904 OR h.size < p.size_class * 2)
WHERE h.snapshot_id = :snapshot_id AND h.memory_id = :memory_id
GROUP BY p.size_class
ORDER BY p.size_class;
