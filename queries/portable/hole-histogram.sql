-- Holes of one memory at one snapshot by power-of-two size class: many small holes and no big
-- one is what fragmentation looks like.
--
-- The portable form of queries/hole-histogram.sql: the same columns and rows, in the same order, from the
-- Parquet dataset of `memstate export`, in DuckDB and Spark SQL (scripts/parquet-query registers
-- its tables as views and binds the parameters as typed values: snapshot_id=RUN:NODE:SEQ gives
-- :snapshot_run, :snapshot_node and :snapshot_seq, memory_id=0x... gives :memory).
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param memory_id    memory    the memory (memories.memory_id)
--
-- @column size_class  bytes    the class's lower bound: holes of at least this size and below twice it
-- @column hole_count  count    holes in the class
-- @column bytes       bytes    their total size
WITH holes AS (
    SELECT h.size
    FROM hole_spans h
    WHERE h.run = :snapshot_run AND h.node = :snapshot_node AND h.memory = :memory
      AND h.first_seq <= :snapshot_seq AND :snapshot_seq <= h.last_seq
),
power AS (
    -- Powers of two from 1 to 2^62, written out: neither engine's recursion nor log2 is needed.
    SELECT p.size_class FROM (VALUES
        (CAST(1 AS BIGINT)),
        (CAST(2 AS BIGINT)),
        (CAST(4 AS BIGINT)),
        (CAST(8 AS BIGINT)),
        (CAST(16 AS BIGINT)),
        (CAST(32 AS BIGINT)),
        (CAST(64 AS BIGINT)),
        (CAST(128 AS BIGINT)),
        (CAST(256 AS BIGINT)),
        (CAST(512 AS BIGINT)),
        (CAST(1024 AS BIGINT)),
        (CAST(2048 AS BIGINT)),
        (CAST(4096 AS BIGINT)),
        (CAST(8192 AS BIGINT)),
        (CAST(16384 AS BIGINT)),
        (CAST(32768 AS BIGINT)),
        (CAST(65536 AS BIGINT)),
        (CAST(131072 AS BIGINT)),
        (CAST(262144 AS BIGINT)),
        (CAST(524288 AS BIGINT)),
        (CAST(1048576 AS BIGINT)),
        (CAST(2097152 AS BIGINT)),
        (CAST(4194304 AS BIGINT)),
        (CAST(8388608 AS BIGINT)),
        (CAST(16777216 AS BIGINT)),
        (CAST(33554432 AS BIGINT)),
        (CAST(67108864 AS BIGINT)),
        (CAST(134217728 AS BIGINT)),
        (CAST(268435456 AS BIGINT)),
        (CAST(536870912 AS BIGINT)),
        (CAST(1073741824 AS BIGINT)),
        (CAST(2147483648 AS BIGINT)),
        (CAST(4294967296 AS BIGINT)),
        (CAST(8589934592 AS BIGINT)),
        (CAST(17179869184 AS BIGINT)),
        (CAST(34359738368 AS BIGINT)),
        (CAST(68719476736 AS BIGINT)),
        (CAST(137438953472 AS BIGINT)),
        (CAST(274877906944 AS BIGINT)),
        (CAST(549755813888 AS BIGINT)),
        (CAST(1099511627776 AS BIGINT)),
        (CAST(2199023255552 AS BIGINT)),
        (CAST(4398046511104 AS BIGINT)),
        (CAST(8796093022208 AS BIGINT)),
        (CAST(17592186044416 AS BIGINT)),
        (CAST(35184372088832 AS BIGINT)),
        (CAST(70368744177664 AS BIGINT)),
        (CAST(140737488355328 AS BIGINT)),
        (CAST(281474976710656 AS BIGINT)),
        (CAST(562949953421312 AS BIGINT)),
        (CAST(1125899906842624 AS BIGINT)),
        (CAST(2251799813685248 AS BIGINT)),
        (CAST(4503599627370496 AS BIGINT)),
        (CAST(9007199254740992 AS BIGINT)),
        (CAST(18014398509481984 AS BIGINT)),
        (CAST(36028797018963968 AS BIGINT)),
        (CAST(72057594037927936 AS BIGINT)),
        (CAST(144115188075855872 AS BIGINT)),
        (CAST(288230376151711744 AS BIGINT)),
        (CAST(576460752303423488 AS BIGINT)),
        (CAST(1152921504606846976 AS BIGINT)),
        (CAST(2305843009213693952 AS BIGINT)),
        (CAST(4611686018427387904 AS BIGINT))
    ) AS p(size_class)
)
SELECT p.size_class,
       count(*) AS hole_count,
       sum(CAST(h.size AS DECIMAL(38, 0))) AS bytes
FROM holes h
JOIN power p ON h.size >= p.size_class AND h.size - p.size_class < p.size_class
GROUP BY p.size_class
ORDER BY p.size_class;
