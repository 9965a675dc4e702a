-- Allocations followed by uid across the snapshots of a run: when each was first and last seen,
-- in how many snapshots, and how big; the longest-lived first. Long-lived small allocations in
-- the middle of a memory are the usual cause of fragmentation. Reads the spans: one row per
-- stretch of unchanged snapshots, not one per snapshot; like growth, memstate's private span
-- table with integer ids, the texts looked up only for the rows shown.
-- A uid seen with another kind or provenance (a producer that reuses ids) is a row of its own;
-- ties are broken down to those columns, so that every engine gives the rows in one order.
--
-- The portable form of queries/long-lived.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- @param run  run      the run (runs.run)
-- @param top  limit    at most this many allocations (default 20)
--
-- @column node        integer       the node that holds it
-- @column uid         id       the allocation
-- @column kind        text     its kind
-- @column provenance  text     where the program asked for it
-- @column size        bytes    its size (the largest seen)
-- @column first_seq   count    the first snapshot (seq) it appears in
-- @column last_seq    count    the last snapshot (seq) it appears in
-- @column snapshots   count    how many snapshots it appears in
-- @column lifetime_s  seconds  time between its first and last snapshot
WITH lives AS (
    SELECT a.node, a.uid, a.kind, a.provenance,
           max(a.size) AS size,
           min(a.first_seq) AS first_seq,
           max(a.last_seq) AS last_seq,
           sum(a.snapshot_count) AS snapshots
    FROM allocation_spans a
    WHERE a.run = :run
    GROUP BY a.node, a.uid, a.kind, a.provenance
)
SELECT v.node,
       v.uid,
       v.kind,
       v.provenance,
       v.size,
       v.first_seq,
       v.last_seq,
       v.snapshots,
       CAST(l.time_ns - f.time_ns AS DOUBLE) / 1e9 AS lifetime_s
FROM lives v
JOIN snapshots f ON f.run = :run AND f.node = v.node AND f.seq = v.first_seq
JOIN snapshots l ON l.run = :run AND l.node = v.node AND l.seq = v.last_seq
ORDER BY v.snapshots DESC, lifetime_s DESC, v.node, v.uid, v.first_seq, v.kind ASC NULLS FIRST,
         v.provenance ASC NULLS FIRST
LIMIT :top;
