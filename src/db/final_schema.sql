-- schema version 12
-- Generated from migrations/ by the test final_schema_is_what_the_migrations_leave
-- (src/db/schema.rs): not edited by hand.

CREATE TABLE string (
    id    INTEGER PRIMARY KEY,
    value TEXT NOT NULL UNIQUE
);

CREATE TABLE run (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    node_count INTEGER,
    producer   INTEGER REFERENCES string (id)
);

CREATE TABLE snapshot (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL REFERENCES run (id),
    node           INTEGER NOT NULL,
    seq            INTEGER NOT NULL,
    time_ns        INTEGER NOT NULL,
    wall_time      TEXT,
    reason         TEXT NOT NULL,
    note           INTEGER REFERENCES string (id),
    producer       INTEGER REFERENCES string (id),
    host           TEXT,
    pid            INTEGER,
    source         TEXT NOT NULL,
    format_version INTEGER NOT NULL,
    digest         BLOB NOT NULL,
    imported_at    TEXT NOT NULL, ordinal INTEGER NOT NULL DEFAULT 0, digest_version INTEGER NOT NULL DEFAULT 1, top_level INTEGER NOT NULL DEFAULT 32,
    UNIQUE (run_id, node, seq)
);

CREATE TABLE memory (
    id     INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES run (id),
    node   INTEGER NOT NULL,
    handle INTEGER NOT NULL,
    kind   INTEGER NOT NULL REFERENCES string (id),
    name   INTEGER REFERENCES string (id), kind_seq INTEGER NOT NULL DEFAULT -1, name_seq INTEGER NOT NULL DEFAULT -1,
    UNIQUE (run_id, node, handle)
);

CREATE TABLE failed_request (
    snapshot_id INTEGER NOT NULL,
    memory_id   INTEGER NOT NULL,
    ordinal     INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    alignment   INTEGER,
    kind        INTEGER,
    provenance  INTEGER,
    time_ns     INTEGER,
    note        INTEGER, device_free INTEGER,
    PRIMARY KEY (snapshot_id, memory_id, ordinal)
) WITHOUT ROWID;

CREATE TABLE object (
    run_id     INTEGER NOT NULL,
    object_key INTEGER NOT NULL,
    kind       INTEGER,
    name       INTEGER,
    shape      TEXT,
    dtype      INTEGER,
    transform  INTEGER,
    partition  INTEGER,
    provenance INTEGER,
    attrs      TEXT,
    PRIMARY KEY (run_id, object_key)
) WITHOUT ROWID;

CREATE TABLE allocation_object (
    run_id     INTEGER NOT NULL,
    uid        INTEGER NOT NULL,
    field_id   INTEGER NOT NULL,
    object_key INTEGER NOT NULL,
    field_size INTEGER,
    PRIMARY KEY (run_id, uid, field_id, object_key)
) WITHOUT ROWID;

CREATE TABLE span_level (
    level INTEGER PRIMARY KEY,
    reach INTEGER NOT NULL
);

CREATE TABLE "hole_span_stored" (
    memory_id INTEGER NOT NULL,
    level     INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    offset    INTEGER NOT NULL,
    last_seq  INTEGER,
    size      INTEGER NOT NULL,
    PRIMARY KEY (memory_id, level, first_seq, offset)
) WITHOUT ROWID;

CREATE TABLE "memory_state" (
    snapshot_id         INTEGER NOT NULL,
    memory_id           INTEGER NOT NULL,
    capacity            INTEGER NOT NULL,
    alignment           INTEGER,
    allocation_count    INTEGER NOT NULL,
    used_bytes          INTEGER NOT NULL,
    free_bytes          INTEGER NOT NULL,
    hole_count          INTEGER NOT NULL,
    largest_hole        INTEGER NOT NULL,
    fragmentation       REAL NOT NULL,
    reclaimable_bytes   INTEGER NOT NULL,
    largest_reclaimable INTEGER NOT NULL,
    unaccounted_bytes   INTEGER NOT NULL,
    holes_listed        INTEGER NOT NULL, unknown TEXT, device_free INTEGER,
    PRIMARY KEY (snapshot_id, memory_id)
) WITHOUT ROWID;

CREATE TABLE "allocation_span_stored" (
    memory_id   INTEGER NOT NULL,
    level       INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    uid         INTEGER NOT NULL,
    last_seq    INTEGER,
    offset      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    handle      INTEGER,
    alignment   INTEGER,
    created_ns  INTEGER,
    provenance  INTEGER,
    label       INTEGER,
    gc_priority INTEGER,
    attrs       TEXT, stack INTEGER,
    PRIMARY KEY (memory_id, level, first_seq, uid)
) WITHOUT ROWID;

CREATE TABLE allocation_span_end (
    memory_id INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    uid       INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    PRIMARY KEY (memory_id, first_seq, uid)
) WITHOUT ROWID;

CREATE TABLE hole_span_end (
    memory_id INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    offset    INTEGER NOT NULL,
    last_seq  INTEGER NOT NULL,
    PRIMARY KEY (memory_id, first_seq, offset)
) WITHOUT ROWID;

CREATE TABLE deferred_index (
    name TEXT PRIMARY KEY,
    tbl  TEXT NOT NULL,
    sql  TEXT NOT NULL,
    stat TEXT
);

CREATE TABLE segment (
    snapshot_id     INTEGER NOT NULL,
    memory_id       INTEGER NOT NULL,
    offset          INTEGER NOT NULL,
    size            INTEGER NOT NULL,
    address         INTEGER NOT NULL,
    pool            INTEGER,
    stream          INTEGER,
    expandable      INTEGER NOT NULL,
    allocated_bytes INTEGER NOT NULL,
    PRIMARY KEY (snapshot_id, memory_id, offset)
) WITHOUT ROWID;

CREATE TABLE frame (
    id   INTEGER PRIMARY KEY,
    file INTEGER NOT NULL REFERENCES string (id),
    line INTEGER NOT NULL,
    name INTEGER NOT NULL,
    UNIQUE (file, line, name)
);

CREATE TABLE stack (
    id     INTEGER PRIMARY KEY,
    frames TEXT NOT NULL UNIQUE
);

CREATE TABLE stack_frame (
    stack_id INTEGER NOT NULL,
    depth    INTEGER NOT NULL,
    frame_id INTEGER NOT NULL,
    PRIMARY KEY (stack_id, depth)
) WITHOUT ROWID;

CREATE INDEX allocation_object_by_uid ON allocation_object (run_id, printf('0x%016x', uid));

CREATE INDEX memory_state_by_memory ON memory_state (memory_id, snapshot_id);

CREATE INDEX snapshot_wall_by_node ON snapshot (run_id, node, seq) WHERE wall_time IS NOT NULL;

CREATE INDEX snapshot_wall_by_time ON snapshot (run_id, time_ns, node) WHERE wall_time IS NOT NULL;

CREATE INDEX allocation_span_by_uid ON "allocation_span_stored" (printf('0x%016x', uid));

CREATE INDEX allocation_span_by_kind ON "allocation_span_stored" (kind);

CREATE INDEX allocation_span_by_state ON "allocation_span_stored" (
    CASE state WHEN 0 THEN 'valid' WHEN 1 THEN 'collectable' WHEN 2 THEN 'pending_free' ELSE 'pending_alloc' END
);

CREATE INDEX hole_span_by_offset ON "hole_span_stored" (memory_id, offset);

CREATE INDEX snapshot_by_node_seq ON snapshot (run_id, node, seq, id, time_ns, ordinal, top_level);

CREATE VIEW strings AS
SELECT id AS string_id, value
FROM string;

CREATE VIEW memories AS
SELECT m.id AS memory_id,
       r.name AS run,
       m.node,
       printf('0x%016x', m.handle) AS handle,
       k.value AS kind,
       n.value AS name,
       m.run_id
FROM memory m
JOIN run r ON r.id = m.run_id
JOIN string k ON k.id = m.kind
LEFT JOIN string n ON n.id = m.name;

CREATE VIEW objects AS
SELECT r.name AS run,
       id.value AS object_id,
       k.value AS kind,
       n.value AS name,
       o.shape,
       d.value AS dtype,
       t.value AS transform,
       pa.value AS partition,
       pr.value AS provenance,
       o.attrs,
       o.run_id
FROM object o
JOIN run r ON r.id = o.run_id
JOIN string id ON id.id = o.object_key
LEFT JOIN string k ON k.id = o.kind
LEFT JOIN string n ON n.id = o.name
LEFT JOIN string d ON d.id = o.dtype
LEFT JOIN string t ON t.id = o.transform
LEFT JOIN string pa ON pa.id = o.partition
LEFT JOIN string pr ON pr.id = o.provenance;

CREATE VIEW allocation_objects AS
SELECT r.name AS run,
       printf('0x%016x', ao.uid) AS uid,
       NULLIF(ao.field_id, -1) AS field_id,
       ao.field_size,
       o.value AS object_id,
       ao.run_id
FROM allocation_object ao
JOIN run r ON r.id = ao.run_id
JOIN string o ON o.id = ao.object_key;

CREATE VIEW runs AS
SELECT r.id AS run_id,
       r.name AS run,
       r.node_count,
       (SELECT p.value FROM snapshot s JOIN string p ON p.id = s.producer
        WHERE s.run_id = r.id ORDER BY s.seq DESC, s.node DESC LIMIT 1) AS producer,
       (SELECT count(*) FROM snapshot s WHERE s.run_id = r.id) AS snapshot_count
FROM run r;

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

CREATE VIEW hole_spans AS
SELECT r.name AS run,
       m.node,
       m.id AS memory_id,
       f.id AS first_snapshot_id,
       l.id AS last_snapshot_id,
       f.seq AS first_seq,
       l.seq AS last_seq,
       f.time_ns AS first_time_ns,
       l.time_ns AS last_time_ns,
       l.ordinal - f.ordinal + 1 AS snapshot_count,
       h.last_seq IS NULL AS open,
       h.offset,
       h.size,
       h.offset + h.size AS end_offset,
       m.run_id
FROM hole_span h
JOIN memory m ON m.id = h.memory_id
JOIN run r ON r.id = m.run_id
JOIN snapshot f ON f.run_id = m.run_id AND f.node = m.node AND f.seq = h.first_seq
JOIN snapshot l ON l.run_id = m.run_id AND l.node = m.node
               AND l.seq = coalesce(h.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = m.run_id AND t.node = m.node));

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
       printf('n%d %s 0x%016x', s.node, k.value, m.handle) AS series,
       ms.unknown
FROM memory_stats ms
JOIN snapshot s ON s.id = ms.snapshot_id
JOIN memory m ON m.id = ms.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind
LEFT JOIN string n ON n.id = m.name;

CREATE VIEW failed_requests AS
SELECT f.snapshot_id,
       f.memory_id,
       f.size,
       f.alignment,
       k.value AS kind,
       p.value AS provenance,
       f.time_ns,
       n.value AS note,
       f.ordinal,
       f.device_free
FROM failed_request f
LEFT JOIN string k ON k.id = f.kind
LEFT JOIN string p ON p.id = f.provenance
LEFT JOIN string n ON n.id = f.note;

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

CREATE VIEW hole_span AS
SELECT h.memory_id,
       h.level,
       h.first_seq,
       h.offset,
       coalesce(h.last_seq,
                CASE WHEN EXISTS (SELECT 1 FROM hole_span_end WHERE memory_id > 0)
                     THEN (SELECT e.last_seq FROM hole_span_end e
                           WHERE e.memory_id = h.memory_id AND e.first_seq = h.first_seq AND e.offset = h.offset)
                END) AS last_seq,
       h.size
FROM hole_span_stored h;

CREATE VIEW holes AS
SELECT s.id AS snapshot_id,
       h.memory_id,
       h.offset,
       h.size,
       h.first_seq AS span_first_seq,
       coalesce(h.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = s.run_id AND t.node = s.node)) AS span_last_seq
FROM snapshot s
JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
JOIN span_level v ON v.level % 64 <= s.top_level
JOIN hole_span h ON h.memory_id = m.id AND h.level = v.level
                AND h.first_seq BETWEEN s.seq - v.reach AND s.seq
                AND s.seq <= coalesce(h.last_seq, 9223372036854775807);

CREATE VIEW segments AS
SELECT sg.snapshot_id,
       sg.memory_id,
       sg.offset,
       sg.size,
       printf('0x%016x', sg.address) AS address,
       p.value AS pool,
       sg.stream,
       sg.expandable,
       sg.allocated_bytes,
       sg.size - sg.allocated_bytes AS free_bytes
FROM segment sg
LEFT JOIN string p ON p.id = sg.pool;

CREATE VIEW memory_stats AS
SELECT snapshot_id,
       memory_id,
       CAST(CASE WHEN instr(unknown, 'capacity') THEN NULL ELSE capacity END AS INTEGER) AS capacity,
       allocation_count,
       CAST(CASE WHEN instr(unknown, 'allocations') THEN NULL ELSE used_bytes END AS INTEGER) AS used_bytes,
       CAST(CASE WHEN instr(unknown, 'allocations') OR (instr(unknown, 'capacity') AND NOT holes_listed) THEN NULL
                 ELSE free_bytes END AS INTEGER) AS free_bytes,
       CAST(CASE WHEN unknown IS NULL OR (unknown = 'capacity' AND holes_listed) THEN hole_count END AS INTEGER) AS hole_count,
       CAST(CASE WHEN unknown IS NULL OR (unknown = 'capacity' AND holes_listed) THEN largest_hole END AS INTEGER) AS largest_hole,
       CAST(CASE WHEN unknown IS NULL OR (unknown = 'capacity' AND holes_listed) THEN fragmentation END AS REAL) AS fragmentation,
       reclaimable_bytes,
       CAST(CASE WHEN unknown IS NULL THEN largest_reclaimable END AS INTEGER) AS largest_reclaimable,
       CAST(CASE WHEN unknown IS NULL THEN unaccounted_bytes END AS INTEGER) AS unaccounted_bytes,
       alignment,
       holes_listed,
       unknown,
       device_free
FROM memory_state;

CREATE VIEW frames AS
SELECT f.id AS frame_id,
       fl.value AS file,
       CASE WHEN f.line < 0 THEN NULL ELSE f.line END AS line,
       n.value AS name
FROM frame f
JOIN string fl ON fl.id = f.file
LEFT JOIN string n ON n.id = f.name;

CREATE VIEW stack_frames AS
SELECT sf.stack_id,
       sf.depth,
       sf.frame_id,
       fl.value AS file,
       CASE WHEN f.line < 0 THEN NULL ELSE f.line END AS line,
       n.value AS name
FROM stack_frame sf
JOIN frame f ON f.id = sf.frame_id
JOIN string fl ON fl.id = f.file
LEFT JOIN string n ON n.id = f.name;

CREATE VIEW allocation_span AS
SELECT a.memory_id,
       a.level,
       a.first_seq,
       a.uid,
       coalesce(a.last_seq,
                CASE WHEN EXISTS (SELECT 1 FROM allocation_span_end WHERE memory_id > 0)
                     THEN (SELECT e.last_seq FROM allocation_span_end e
                           WHERE e.memory_id = a.memory_id AND e.first_seq = a.first_seq AND e.uid = a.uid)
                END) AS last_seq,
       a.offset,
       a.size,
       a.state,
       a.kind,
       a.handle,
       a.alignment,
       a.created_ns,
       a.provenance,
       a.label,
       a.gc_priority,
       a.attrs,
       a.stack AS stack_id
FROM allocation_span_stored a;

CREATE VIEW allocations AS
SELECT s.id AS snapshot_id,
       a.memory_id,
       printf('0x%016x', a.uid) AS uid,
       CASE WHEN a.handle IS NULL THEN NULL ELSE printf('0x%016x', a.handle) END AS handle,
       a.kind,
       CASE a.state
           WHEN 0 THEN 'valid'
           WHEN 1 THEN 'collectable'
           WHEN 2 THEN 'pending_free'
           ELSE 'pending_alloc'
       END AS state,
       a.offset,
       a.size,
       a.alignment,
       a.created_ns,
       (SELECT p.value FROM string p WHERE p.id = a.provenance) AS provenance,
       (SELECT l.value FROM string l WHERE l.id = a.label) AS label,
       a.gc_priority,
       a.attrs,
       a.offset + a.size AS end_offset,
       a.first_seq AS span_first_seq,
       coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = s.run_id AND t.node = s.node)) AS span_last_seq,
       a.stack_id
FROM snapshot s
JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
JOIN span_level v ON v.level % 64 <= s.top_level
JOIN allocation_span a ON a.memory_id = m.id AND a.level = v.level
                      AND a.first_seq BETWEEN s.seq - v.reach AND s.seq
                      AND s.seq <= coalesce(a.last_seq, 9223372036854775807);

CREATE VIEW allocation_spans AS
SELECT r.name AS run,
       m.node,
       m.id AS memory_id,
       printf('0x%016x', a.uid) AS uid,
       f.id AS first_snapshot_id,
       l.id AS last_snapshot_id,
       f.seq AS first_seq,
       l.seq AS last_seq,
       f.time_ns AS first_time_ns,
       l.time_ns AS last_time_ns,
       l.ordinal - f.ordinal + 1 AS snapshot_count,
       a.last_seq IS NULL AS open,
       CASE WHEN a.handle IS NULL THEN NULL ELSE printf('0x%016x', a.handle) END AS handle,
       a.kind,
       CASE a.state
           WHEN 0 THEN 'valid'
           WHEN 1 THEN 'collectable'
           WHEN 2 THEN 'pending_free'
           ELSE 'pending_alloc'
       END AS state,
       a.offset,
       a.size,
       a.alignment,
       a.created_ns,
       (SELECT p.value FROM string p WHERE p.id = a.provenance) AS provenance,
       (SELECT lb.value FROM string lb WHERE lb.id = a.label) AS label,
       a.gc_priority,
       a.attrs,
       a.offset + a.size AS end_offset,
       m.run_id,
       a.stack_id
FROM allocation_span a
JOIN memory m ON m.id = a.memory_id
JOIN run r ON r.id = m.run_id
JOIN snapshot f ON f.run_id = m.run_id AND f.node = m.node AND f.seq = a.first_seq
JOIN snapshot l ON l.run_id = m.run_id AND l.node = m.node
               AND l.seq = coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = m.run_id AND t.node = m.node));

INSERT INTO span_level (level, reach) VALUES (0, 0);
INSERT INTO span_level (level, reach) VALUES (1, 3);
INSERT INTO span_level (level, reach) VALUES (2, 15);
INSERT INTO span_level (level, reach) VALUES (3, 63);
INSERT INTO span_level (level, reach) VALUES (4, 255);
INSERT INTO span_level (level, reach) VALUES (5, 1023);
INSERT INTO span_level (level, reach) VALUES (6, 4095);
INSERT INTO span_level (level, reach) VALUES (7, 16383);
INSERT INTO span_level (level, reach) VALUES (8, 65535);
INSERT INTO span_level (level, reach) VALUES (9, 262143);
INSERT INTO span_level (level, reach) VALUES (10, 1048575);
INSERT INTO span_level (level, reach) VALUES (11, 4194303);
INSERT INTO span_level (level, reach) VALUES (12, 16777215);
INSERT INTO span_level (level, reach) VALUES (13, 67108863);
INSERT INTO span_level (level, reach) VALUES (14, 268435455);
INSERT INTO span_level (level, reach) VALUES (15, 1073741823);
INSERT INTO span_level (level, reach) VALUES (16, 4294967295);
INSERT INTO span_level (level, reach) VALUES (17, 17179869183);
INSERT INTO span_level (level, reach) VALUES (18, 68719476735);
INSERT INTO span_level (level, reach) VALUES (19, 274877906943);
INSERT INTO span_level (level, reach) VALUES (20, 1099511627775);
INSERT INTO span_level (level, reach) VALUES (21, 4398046511103);
INSERT INTO span_level (level, reach) VALUES (22, 17592186044415);
INSERT INTO span_level (level, reach) VALUES (23, 70368744177663);
INSERT INTO span_level (level, reach) VALUES (24, 281474976710655);
INSERT INTO span_level (level, reach) VALUES (25, 1125899906842623);
INSERT INTO span_level (level, reach) VALUES (26, 4503599627370495);
INSERT INTO span_level (level, reach) VALUES (27, 18014398509481983);
INSERT INTO span_level (level, reach) VALUES (28, 72057594037927935);
INSERT INTO span_level (level, reach) VALUES (29, 288230376151711743);
INSERT INTO span_level (level, reach) VALUES (30, 1152921504606846975);
INSERT INTO span_level (level, reach) VALUES (31, 4611686018427387903);
INSERT INTO span_level (level, reach) VALUES (32, 9223372036854775807);
INSERT INTO span_level (level, reach) VALUES (64, 9223372036854775807);

ANALYZE span_level;
DELETE FROM sqlite_stat1;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('span_level', NULL, '34');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_span_stored', 'allocation_span_stored', '10000000 50000 10000 100 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_span_stored', 'allocation_span_by_uid', '10000000 2');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_span_stored', 'allocation_span_by_state', '10000000 2500000');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_span_stored', 'allocation_span_by_kind', '10000000 1000000');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('hole_span_stored', 'hole_span_by_offset', '10000000 50000 2');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('hole_span_stored', 'hole_span_stored', '10000000 50000 10000 100 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('snapshot', 'sqlite_autoindex_snapshot_1', '1000 1000 1000 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('snapshot', 'snapshot_wall_by_node', '1000 1000 1000 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('snapshot', 'snapshot_wall_by_time', '1000 1000 1 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('memory', 'sqlite_autoindex_memory_1', '40 40 4 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('memory_state', 'memory_state', '4000 4 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('memory_state', 'memory_state_by_memory', '4000 100 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('string', 'sqlite_autoindex_string_1', '10000 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('run', 'sqlite_autoindex_run_1', '1 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_object', 'allocation_object_by_uid', '100000 100000 2');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_object', 'allocation_object', '100000 100000 2 1 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('object', 'object', '10000 10000 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('failed_request', 'failed_request', '100 2 1 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('allocation_span_end', 'allocation_span_end', '1000 100 1 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('hole_span_end', 'hole_span_end', '1000 100 1 1');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('snapshot', 'snapshot_by_node_seq', '1000 1000 1000 1 1 1 1 1');
