-- Allocations of one snapshot grouped by the client object (a Legate store) whose fields they
-- hold: which user-level objects take the memory. An allocation holding fields of several objects
-- counts for each of them; allocations linked to no object are the NULL group.
--
-- The portable form of queries/usage-by-object.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
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
WITH live AS (
    SELECT a.uid, a.size
    FROM allocation_spans a
    WHERE a.run = :snapshot_run AND a.node = :snapshot_node
      AND a.first_seq <= :snapshot_seq AND :snapshot_seq <= a.last_seq
),
links AS (
    SELECT ao.uid, ao.object_id FROM allocation_objects ao WHERE ao.run = :snapshot_run
),
linked AS (
    -- Each allocation once per object it holds fields of, or once with no object.
    SELECT DISTINCT l.uid, l.size, k.object_id
    FROM live l JOIN links k ON k.uid = l.uid
    UNION ALL
    SELECT l.uid, l.size, CAST(NULL AS STRING) AS object_id
    FROM live l
    WHERE NOT EXISTS (SELECT 1 FROM links k WHERE k.uid = l.uid)
),
grouped AS (
    SELECT object_id, count(*) AS allocation_count, sum(CAST(size AS DECIMAL(38, 0))) AS bytes
    FROM linked
    GROUP BY object_id
)
SELECT g.object_id, ob.name, g.allocation_count, g.bytes
FROM grouped g
LEFT JOIN (SELECT o.object_id, o.name FROM objects o WHERE o.run = :snapshot_run) ob ON ob.object_id = g.object_id
ORDER BY g.bytes DESC, g.object_id ASC NULLS FIRST;
