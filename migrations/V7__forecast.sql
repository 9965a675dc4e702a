-- A forecast per memory per snapshot (issue 31): is the largest hole falling toward the requests
-- the memory has seen lately? From the last 8 dumps of the memory's node up to this snapshot:
--
-- * hole_trend: the least-squares slope of largest_hole against the dump's place in the node's
--   run (bytes per dump), from at least 3 dumps whose largest hole is known;
-- * largest_request: the largest allocation that appeared (a span starting at that dump) or
--   request that failed in those dumps;
-- * dumps_left: how many dumps until the largest hole, going on at hole_trend, falls below
--   largest_request (0 when it already has; NULL when it is not falling or nothing is known);
-- * warning: 1 when dumps_left is 5 or fewer, 0 when more or not falling, NULL when unknown.
--
-- A question about one snapshot or one memory is a search (the WHERE reaches the inner GROUP BY):
-- 8 rows of memory_state and a search of the span table per level for each.

CREATE VIEW memory_forecast AS
SELECT r.name AS run,
       s.node,
       s.seq,
       f.snapshot_id,
       f.memory_id,
       printf('0x%016x', m.handle) AS handle,
       k.value AS kind,
       f.dumps,
       f.largest_hole,
       f.hole_trend,
       f.largest_request,
       CAST(f.dumps_left AS INTEGER) AS dumps_left,
       CASE WHEN f.dumps_left IS NOT NULL THEN f.dumps_left <= 5
            WHEN f.hole_trend IS NOT NULL AND f.largest_hole IS NOT NULL THEN 0 END AS warning
FROM (
    SELECT g.*,
           CASE WHEN g.largest_hole IS NULL OR g.largest_request = 0 THEN NULL
                WHEN g.largest_hole < g.largest_request THEN 0
                WHEN g.hole_trend < 0 THEN (g.largest_hole - g.largest_request) / -g.hole_trend END AS dumps_left
    FROM (
        SELECT cur.snapshot_id,
               cur.memory_id,
               count(*) AS dumps,
               CAST(CASE WHEN cur.unknown IS NULL THEN cur.largest_hole END AS INTEGER) AS largest_hole,
               CASE WHEN count(p.h) >= 3 AND count(p.h) * sum(p.x * p.x) - sum(p.x) * sum(p.x) <> 0
                    THEN (count(p.h) * sum(p.x * p.h) - sum(p.x) * sum(p.h))
                         / (count(p.h) * sum(p.x * p.x) - sum(p.x) * sum(p.x)) END AS hole_trend,
               max(max(p.created, p.failed)) AS largest_request
        FROM memory_state cur
        JOIN snapshot cs ON cs.id = cur.snapshot_id
        JOIN (
            SELECT ps.run_id, ps.node, ps.ordinal, pm.memory_id,
                   CAST(ps.ordinal AS REAL) AS x,
                   CAST(CASE WHEN pm.unknown IS NULL THEN pm.largest_hole END AS REAL) AS h,
                   coalesce((SELECT max(a.size) FROM allocation_span a
                             WHERE a.memory_id = pm.memory_id
                               AND a.level IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20,
                                               21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 64)
                               AND a.first_seq = ps.seq), 0) AS created,
                   coalesce((SELECT max(fr.size) FROM failed_request fr
                             WHERE fr.snapshot_id = pm.snapshot_id AND fr.memory_id = pm.memory_id), 0) AS failed
            FROM memory_state pm
            JOIN snapshot ps ON ps.id = pm.snapshot_id
        ) p ON p.memory_id = cur.memory_id AND p.run_id = cs.run_id AND p.node = cs.node
           AND p.ordinal BETWEEN cs.ordinal - 7 AND cs.ordinal
        GROUP BY cur.snapshot_id, cur.memory_id
    ) g
) f
JOIN snapshot s ON s.id = f.snapshot_id
JOIN memory m ON m.id = f.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind;
