-- Why: dashboards (Grafana's SQLite data source, Datasette, pandas) need time as Unix time and a
-- readable label per line. `memory_trend` and `snapshots` gain two columns at the end; every
-- existing column stays as it was.
--
-- * time_unix: seconds since the Unix epoch. A dump's own wall_time when it has one; else its
--   time_ns added to the wall clock of the closest dump that has one: the first dump of the same
--   node (by seq) with a wall_time, else the run's earliest (by time_ns) on any node. NULL when no
--   dump of the run has a wall_time. Computed when read, so importing dumps in any order, or
--   replacing one, needs nothing rewritten; two partial indexes make each anchor one index probe.
--   A leap second (:60) reads as the next second; milliseconds are kept. julianday(), not
--   unixepoch(..., 'subsec'): the views must read the same in older SQLite programs (Debian 12's
--   sqlite3 is 3.40, before 'subsec'), in Grafana's SQLite plugin and in Python's sqlite3.
-- * series: a short label unique within a run: `n0 GPU_FB_MEM 0x1e00000000000002` for a memory,
--   `n0` for a node's snapshots.

CREATE INDEX snapshot_wall_by_node ON snapshot (run_id, node, seq) WHERE wall_time IS NOT NULL;
CREATE INDEX snapshot_wall_by_time ON snapshot (run_id, time_ns, node) WHERE wall_time IS NOT NULL;

DROP VIEW snapshots;
CREATE VIEW snapshots AS
SELECT s.id AS snapshot_id,
       r.name AS run,
       s.node,
       s.seq,
       s.time_ns,
       s.wall_time,
       s.reason,
       n.value AS note,
       s.source,
       s.format_version,
       s.imported_at,
       s.run_id,
       s.time_ns / 1e9 AS time_s,
       s.host,
       s.pid,
       p.value AS producer,
       coalesce(
           CASE WHEN substr(s.wall_time, 18, 2) = '60'
                THEN round((julianday(upper(substr(s.wall_time, 1, 17) || '59' || substr(s.wall_time, 20))) - 2440587.5) * 86400.0, 3) + 1
                ELSE round((julianday(upper(s.wall_time)) - 2440587.5) * 86400.0, 3) END,
           s.time_ns / 1e9 + (SELECT CASE WHEN substr(a.wall_time, 18, 2) = '60'
                                          THEN round((julianday(upper(substr(a.wall_time, 1, 17) || '59' || substr(a.wall_time, 20))) - 2440587.5) * 86400.0, 3) + 1
                                          ELSE round((julianday(upper(a.wall_time)) - 2440587.5) * 86400.0, 3) END - a.time_ns / 1e9
                              FROM snapshot a WHERE a.run_id = s.run_id AND a.node = s.node AND a.wall_time IS NOT NULL
                              ORDER BY a.seq LIMIT 1),
           s.time_ns / 1e9 + (SELECT CASE WHEN substr(a.wall_time, 18, 2) = '60'
                                          THEN round((julianday(upper(substr(a.wall_time, 1, 17) || '59' || substr(a.wall_time, 20))) - 2440587.5) * 86400.0, 3) + 1
                                          ELSE round((julianday(upper(a.wall_time)) - 2440587.5) * 86400.0, 3) END - a.time_ns / 1e9
                              FROM snapshot a WHERE a.run_id = s.run_id AND a.wall_time IS NOT NULL
                              ORDER BY a.time_ns, a.node LIMIT 1)
       ) AS time_unix,
       printf('n%d', s.node) AS series
FROM snapshot s
JOIN run r ON r.id = s.run_id
LEFT JOIN string n ON n.id = s.note
LEFT JOIN string p ON p.id = s.producer;

DROP VIEW memory_trend;
CREATE VIEW memory_trend AS
SELECT r.name AS run,
       s.node,
       s.seq,
       s.time_ns,
       s.time_ns / 1e9 AS time_s,
       s.wall_time,
       printf('0x%016x', m.handle) AS handle,
       k.value AS kind,
       ms.capacity,
       ms.allocation_count,
       ms.used_bytes,
       ms.free_bytes,
       ms.hole_count,
       ms.largest_hole,
       ms.fragmentation,
       ms.reclaimable_bytes,
       ms.largest_reclaimable,
       ms.unaccounted_bytes,
       ms.snapshot_id,
       ms.memory_id,
       n.value AS name,
       s.reason,
       (SELECT t.time_unix FROM snapshots t WHERE t.snapshot_id = ms.snapshot_id) AS time_unix,
       printf('n%d %s 0x%016x', s.node, k.value, m.handle) AS series
FROM memory_state ms
JOIN snapshot s ON s.id = ms.snapshot_id
JOIN memory m ON m.id = ms.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind
LEFT JOIN string n ON n.id = m.name;
