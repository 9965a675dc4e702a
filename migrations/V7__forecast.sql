-- A forecast per memory per snapshot (issue 31): is the largest hole falling toward the requests
-- the memory has seen lately? From the last 8 dumps of the memory's node up to this snapshot:
--
-- * hole_trend: the least-squares slope of largest_hole against the dump's place in the node's
--   run (bytes per dump), from at least 3 dumps whose largest hole is known;
-- * largest_request: the largest allocation that appeared (a span starting at that dump) or
--   request that failed in those dumps;
-- * dumps_left: how many dumps until the largest hole, going on at hole_trend, falls below
--   largest_request (0 when it already has; NULL when it is not falling or nothing is known);
-- * dumps_left_before: the same at the memory's dump before this one (from the 8 dumps up to it);
-- * warning: 1 when both are 5 or fewer (a forecast said at two dumps in a row, not one dip),
--   0 when not, NULL when unknown.
--
-- The largest hole is the dump's own (collectable instances count as taken): a runtime that must
-- collect to place its requests is already short. Why these choices, and how well they forecast
-- simulated runs: docs/FORECAST.md.
--
-- A question about one snapshot or one memory is a search (the WHERE reaches the inner GROUP BY):
-- 9 rows of memory_state and a search of the span table per level for each.

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
       CAST(f.dumps_left_before AS INTEGER) AS dumps_left_before,
       CASE WHEN f.dumps_left IS NOT NULL AND f.dumps_left_before IS NOT NULL
                 THEN f.dumps_left <= 5 AND f.dumps_left_before <= 5
            WHEN f.largest_hole IS NOT NULL AND f.hole_trend IS NOT NULL THEN 0 END AS warning
FROM (
    SELECT g.snapshot_id,
           g.memory_id,
           g.dumps,
           g.largest_hole,
           g.hole_trend,
           g.largest_request,
           CASE WHEN g.largest_hole IS NULL OR g.largest_request = 0 THEN NULL
                WHEN g.largest_hole < g.largest_request THEN 0
                WHEN g.hole_trend < 0 THEN (g.largest_hole - g.largest_request) / -g.hole_trend END AS dumps_left,
           CASE WHEN g.hole_before IS NULL OR g.request_before = 0 THEN NULL
                WHEN g.hole_before < g.request_before THEN 0
                WHEN g.trend_before < 0 THEN (g.hole_before - g.request_before) / -g.trend_before END AS dumps_left_before
    FROM (
        SELECT w.snapshot_id,
               w.memory_id,
               count(CASE WHEN w.now THEN 1 END) AS dumps,
               CAST(max(CASE WHEN w.latest THEN w.h END) AS INTEGER) AS largest_hole,
               CASE WHEN count(CASE WHEN w.now THEN w.h END) >= 3
                     AND count(CASE WHEN w.now THEN w.h END) * sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x * w.x END)
                         - sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x END) * sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x END) <> 0
                    THEN (count(CASE WHEN w.now THEN w.h END) * sum(CASE WHEN w.now THEN w.x * w.h END)
                          - sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x END) * sum(CASE WHEN w.now THEN w.h END))
                         / (count(CASE WHEN w.now THEN w.h END) * sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x * w.x END)
                            - sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x END) * sum(CASE WHEN w.now AND w.h IS NOT NULL THEN w.x END)) END AS hole_trend,
               max(CASE WHEN w.now THEN w.request END) AS largest_request,
               max(CASE WHEN w.previous THEN w.h END) AS hole_before,
               CASE WHEN count(CASE WHEN w.before THEN w.h END) >= 3
                     AND count(CASE WHEN w.before THEN w.h END) * sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x * w.x END)
                         - sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x END) * sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x END) <> 0
                    THEN (count(CASE WHEN w.before THEN w.h END) * sum(CASE WHEN w.before THEN w.x * w.h END)
                          - sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x END) * sum(CASE WHEN w.before THEN w.h END))
                         / (count(CASE WHEN w.before THEN w.h END) * sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x * w.x END)
                            - sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x END) * sum(CASE WHEN w.before AND w.h IS NOT NULL THEN w.x END)) END AS trend_before,
               max(CASE WHEN w.before THEN w.request END) AS request_before
        FROM (
            -- Each of the memory's dumps among the node's 9 up to this one: whether it is in this
            -- dump's window (the last 8), in the one before's (8 up to the previous dump), or is
            -- this dump or the previous.
            SELECT cur.snapshot_id,
                   cur.memory_id,
                   p.ordinal >= cs.ordinal - 7 AS now,
                   p.ordinal < cs.ordinal AS before,
                   p.ordinal = cs.ordinal AS latest,
                   p.ordinal = cs.ordinal - 1 AS previous,
                   p.x,
                   p.h,
                   max(p.created, p.failed) AS request
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
               AND p.ordinal BETWEEN cs.ordinal - 8 AND cs.ordinal
        ) w
        GROUP BY w.snapshot_id, w.memory_id
    ) g
) f
JOIN snapshot s ON s.id = f.snapshot_id
JOIN memory m ON m.id = f.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind;
