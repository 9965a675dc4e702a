-- Why: importing wrote each page of the file about fifty times over (issue 32). When a span ends,
-- version 7 moved its row from the open level (64) to its closed level, and every index entry
-- moved with it. The spans that end in one dump are spread over the whole table, so every dump
-- rewrote most of the file: 484 MB written for a 9.4 MB database on the scale bench's 2.2M-row
-- run.
--
-- * An open span that ends is now recorded in a small table of ends, keyed like the span (memory,
--   first_seq, uid or offset): the span's row stays where it is, open, and its index entries do
--   not move. A dump writes its new spans (at the end of the open level, first_seq being the
--   newest seq) and its ends (a table a few pages long), not the whole file.
-- * The ends are moved into the span table, each span to its closed level, when the importer
--   finishes (and, during a very long import, when they pile up): once per import, not once per
--   dump. Until then they are part of the data: a reader during an import, or after a killed
--   one, reads the same spans as after the move.
-- * The span tables become allocation_span_stored and hole_span_stored. The names
--   allocation_span and hole_span are now views that give each stored span its end: a row of the
--   open level whose span ended reads with its last_seq from the ends table: one primary-key probe,
--   made only for rows stored open and only while ends are recorded (whether any are is asked
--   once per statement, as SQLite runs a subquery that names no outer column once: at rest, a
--   query over every row of a 10M-row run pays nothing for the ends; `memory_id > 0`, true of
--   every row, makes that question a search for the first row, which no plan check mistakes for
--   a scan of the table). Every view and query that read the tables reads the views
--   by the same names and columns, so none of them changes. The views are plain selects, which
--   SQLite flattens into the query that names them: the level ranges, the uid, state, kind and
--   offset indexes are used as before.
-- * The rename keeps the views that name allocation_span and hole_span as they are (legacy mode),
--   so that they read the new views by those names.

PRAGMA legacy_alter_table = ON;
ALTER TABLE allocation_span RENAME TO allocation_span_stored;
ALTER TABLE hole_span RENAME TO hole_span_stored;
PRAGMA legacy_alter_table = OFF;

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
       a.attrs
FROM allocation_span_stored a;

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

-- The fixed statistics of version 4 follow the tables to their new names (the primary key of a
-- table without rowid is named after the table); the ends tables are small.
UPDATE sqlite_stat1 SET idx = idx || '_stored' WHERE idx IN ('allocation_span', 'hole_span');
UPDATE sqlite_stat1 SET tbl = tbl || '_stored' WHERE tbl IN ('allocation_span', 'hole_span');
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('allocation_span_end', 'allocation_span_end', '1000 100 1 1'),
    ('hole_span_end', 'hole_span_end', '1000 100 1 1');
