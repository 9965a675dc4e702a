-- Allocations of one snapshot grouped by the client object (a Legate store) whose fields they
-- hold: which user-level objects take the memory. An allocation holding fields of several objects
-- counts for each of them; allocations linked to no object are the NULL group.
--
-- @param snapshot_id  integer  the snapshot (snapshots.snapshot_id)
--
-- @column object_id         text   the object's id
-- @column name              text   the object's name, if known
-- @column allocation_count  count  allocations holding its fields
-- @column bytes             bytes  their total size
SELECT o.object_id,
       ob.name,
       count(*) AS allocation_count,
       sum(a.size) AS bytes
FROM allocations a
JOIN snapshots s ON s.snapshot_id = a.snapshot_id
LEFT JOIN (SELECT DISTINCT run, uid, object_id FROM allocation_objects) o ON o.run = s.run AND o.uid = a.uid
LEFT JOIN objects ob ON ob.run = s.run AND ob.object_id = o.object_id
WHERE a.snapshot_id = :snapshot_id
GROUP BY o.object_id, ob.name
ORDER BY bytes DESC, o.object_id;
