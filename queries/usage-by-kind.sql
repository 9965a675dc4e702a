-- Allocations of one snapshot grouped by kind: count and bytes, largest first, with each group's
-- share of all allocated bytes of the snapshot.
--
-- Sizes are summed in two halves (high and low 32 bits) and put together: exact while the total
-- fits in 64 bits, a real number beyond (sizes reach 2^63 - 1, and SQLite's sum() stops with
-- "integer overflow" past that).
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
--
-- @column kind              text   the kind (NULL when the dumps gave none)
-- @column allocation_count  count  allocations in the group
-- @column bytes             bytes  their total size
-- @column share             ratio  bytes / all allocated bytes of the snapshot (0 to 1)
SELECT kind,
       count(*) AS allocation_count,
       (sum(size >> 32) * 4294967296 + sum(size & 4294967295)) AS bytes,
       total(size) / (SELECT total(size) FROM allocations WHERE snapshot_id = :snapshot_id) AS share
FROM allocations
WHERE snapshot_id = :snapshot_id
GROUP BY kind
ORDER BY bytes DESC, kind;
