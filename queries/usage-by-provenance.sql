-- Allocations of one snapshot grouped by provenance: count and bytes, largest first, with each group's
-- share of all allocated bytes of the snapshot.
--
-- @param snapshot_id  integer  the snapshot (snapshots.snapshot_id)
--
-- @column provenance        text   the provenance (NULL when the dumps gave none)
-- @column allocation_count  count  allocations in the group
-- @column bytes             bytes  their total size
-- @column share             ratio  bytes / all allocated bytes of the snapshot (0 to 1)
SELECT provenance,
       count(*) AS allocation_count,
       sum(size) AS bytes,
       CAST(sum(size) AS REAL) / (SELECT sum(size) FROM allocations WHERE snapshot_id = :snapshot_id) AS share
FROM allocations
WHERE snapshot_id = :snapshot_id
GROUP BY provenance
ORDER BY bytes DESC, provenance;
