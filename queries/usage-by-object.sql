-- Allocations of one snapshot grouped by the client object (a Legate store) whose fields they
-- hold: which user-level objects take the memory. An allocation holding fields of several objects
-- counts for each of them; allocations linked to no object are the NULL group.
--
-- Sizes are summed in two halves (high and low 32 bits) and put together: exact while the total
-- fits in 64 bits, a real number beyond (sizes reach 2^63 - 1, and SQLite's sum() stops with
-- "integer overflow" past that).
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
--
-- @column object_id         text   the object's id
-- @column name              text   the object's name, if known
-- @column allocation_count  count  allocations holding its fields
-- @column bytes             bytes  their total size
WITH this_snapshot AS (
    SELECT run_id FROM snapshots WHERE snapshot_id = :snapshot_id
),
linked AS (
    -- Each allocation once per object it holds fields of, or once with no object. (An inner join
    -- and NOT EXISTS rather than a LEFT JOIN, so that SQLite searches the links by uid.)
    SELECT DISTINCT a.uid, a.size, ao.object_id
    FROM allocations a
    JOIN allocation_objects ao ON ao.run_id = (SELECT run_id FROM this_snapshot) AND ao.uid = a.uid
    WHERE a.snapshot_id = :snapshot_id
    UNION ALL
    SELECT a.uid, a.size, NULL
    FROM allocations a
    WHERE a.snapshot_id = :snapshot_id
      AND NOT EXISTS (SELECT 1 FROM allocation_objects ao WHERE ao.run_id = (SELECT run_id FROM this_snapshot) AND ao.uid = a.uid)
)
SELECT l.object_id,
       (SELECT ob.name FROM objects ob WHERE ob.run_id = (SELECT run_id FROM this_snapshot) AND ob.object_id = l.object_id) AS name,
       count(*) AS allocation_count,
       (sum(l.size >> 32) * 4294967296 + sum(l.size & 4294967295)) AS bytes
FROM linked l
GROUP BY l.object_id
ORDER BY bytes DESC, l.object_id;
