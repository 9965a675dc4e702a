-- Why: the first schema of memstate. Private storage tables (singular names) hold snapshots as
-- compactly as SQLite allows: ids as 64-bit integers, repeated strings interned in `string`, and
-- allocations clustered by (snapshot_id, memory_id) in a WITHOUT ROWID table, so that a new
-- snapshot is appended at the end of the B-tree and every (snapshot, memory) pair is one range read;
-- memory_state is indexed both ways, so one memory across all snapshots reads one range per snapshot. The public
-- API is the set of views at the end (plural names, documented in docs/SCHEMA.md): they keep their
-- names and columns in every later schema version, whatever happens to the tables behind them.

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
    imported_at    TEXT NOT NULL,
    UNIQUE (run_id, node, seq)
);

-- A memory of one node of a run; `handle` is the Realm memory id as a 64-bit pattern.
CREATE TABLE memory (
    id     INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES run (id),
    node   INTEGER NOT NULL,
    handle INTEGER NOT NULL,
    kind   INTEGER NOT NULL REFERENCES string (id),
    name   INTEGER REFERENCES string (id),
    UNIQUE (run_id, node, handle)
);

-- One memory in one snapshot, with the figures derived at import.
CREATE TABLE memory_state (
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
    holes_listed        INTEGER NOT NULL,
    -- The holes as a JSON array of [offset, size] pairs sorted by offset: one row per memory and
    -- snapshot instead of one per hole keeps imports fast; the `holes` view unpacks it.
    holes               TEXT NOT NULL,
    PRIMARY KEY (snapshot_id, memory_id)
) WITHOUT ROWID;

CREATE INDEX memory_state_by_memory ON memory_state (memory_id, snapshot_id);

-- state: 0 valid, 1 collectable, 2 pending_free, 3 pending_alloc. uid and handle: 64-bit patterns.
CREATE TABLE allocation (
    memory_id   INTEGER NOT NULL,
    snapshot_id INTEGER NOT NULL,
    offset      INTEGER NOT NULL,
    uid         INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    kind        INTEGER NOT NULL,
    handle      INTEGER,
    alignment   INTEGER,
    created_ns  INTEGER,
    provenance  INTEGER,
    label       INTEGER,
    gc_priority INTEGER,
    attrs       TEXT,
    PRIMARY KEY (snapshot_id, memory_id, offset, uid)
) WITHOUT ROWID;

CREATE TABLE failed_request (
    snapshot_id INTEGER NOT NULL,
    memory_id   INTEGER NOT NULL,
    ordinal     INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    alignment   INTEGER,
    kind        INTEGER,
    provenance  INTEGER,
    time_ns     INTEGER,
    note        INTEGER,
    PRIMARY KEY (snapshot_id, memory_id, ordinal)
) WITHOUT ROWID;

-- A client-level object of a run; `object_key` is its id (an interned string).
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

-- field_id is -1 when a link covers the whole allocation (no field given).
CREATE TABLE allocation_object (
    run_id     INTEGER NOT NULL,
    uid        INTEGER NOT NULL,
    field_id   INTEGER NOT NULL,
    object_key INTEGER NOT NULL,
    field_size INTEGER,
    PRIMARY KEY (run_id, uid, field_id, object_key)
) WITHOUT ROWID;

-- The public views. Ids are shown as '0x' and 16 lowercase hex digits.

CREATE VIEW strings AS
SELECT id AS string_id, value
FROM string;

CREATE VIEW runs AS
SELECT r.id AS run_id,
       r.name AS run,
       r.node_count,
       p.value AS producer,
       (SELECT count(*) FROM snapshot s WHERE s.run_id = r.id) AS snapshot_count
FROM run r
LEFT JOIN string p ON p.id = r.producer;

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
       p.value AS producer
FROM snapshot s
JOIN run r ON r.id = s.run_id
LEFT JOIN string n ON n.id = s.note
LEFT JOIN string p ON p.id = s.producer;

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

CREATE VIEW memory_stats AS
SELECT snapshot_id,
       memory_id,
       capacity,
       allocation_count,
       used_bytes,
       free_bytes,
       hole_count,
       largest_hole,
       fragmentation,
       reclaimable_bytes,
       largest_reclaimable,
       unaccounted_bytes,
       alignment,
       holes_listed
FROM memory_state;

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
       s.reason
FROM memory_state ms
JOIN snapshot s ON s.id = ms.snapshot_id
JOIN memory m ON m.id = ms.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind
LEFT JOIN string n ON n.id = m.name;

CREATE VIEW allocations AS
SELECT ms.snapshot_id,
       ms.memory_id,
       printf('0x%016x', a.uid) AS uid,
       CASE WHEN a.handle IS NULL THEN NULL ELSE printf('0x%016x', a.handle) END AS handle,
       k.value AS kind,
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
       p.value AS provenance,
       l.value AS label,
       a.gc_priority,
       a.attrs,
       a.offset + a.size AS end_offset
FROM memory_state ms
JOIN allocation a ON a.memory_id = ms.memory_id AND a.snapshot_id = ms.snapshot_id
JOIN string k ON k.id = a.kind
LEFT JOIN string p ON p.id = a.provenance
LEFT JOIN string l ON l.id = a.label;

CREATE VIEW holes AS
SELECT ms.snapshot_id,
       ms.memory_id,
       json_extract(h.value, '$[0]') AS offset,
       json_extract(h.value, '$[1]') AS size
FROM memory_state ms, json_each(ms.holes) h;

CREATE VIEW failed_requests AS
SELECT f.snapshot_id,
       f.memory_id,
       f.size,
       f.alignment,
       k.value AS kind,
       p.value AS provenance,
       f.time_ns,
       n.value AS note,
       f.ordinal
FROM failed_request f
LEFT JOIN string k ON k.id = f.kind
LEFT JOIN string p ON p.id = f.provenance
LEFT JOIN string n ON n.id = f.note;

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
