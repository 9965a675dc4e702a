-- Why: importing a run wrote each page of the file about fourteen times over (issue 32). Most of
-- it was four secondary indexes of the span tables: by uid, by offset, by kind and by state.
-- Each dump adds a few hundred spans whose uids and offsets fall all over those indexes, so every
-- dump's transaction rewrote most of their pages (on the scale bench's 2.2M-row run, 324 of the
-- 440 pages a dump wrote; 95 MB of write-ahead log for a 9.1 MB file).
--
-- * A bulk import (`memstate import` of a new file, or one that grows the file by a third) now
--   drops those four indexes in its first dump's transaction and builds them again, sorted and
--   packed, when it finishes: each of their pages is written once. Each dump is still one
--   transaction, and every committed dump is in the span tables as before.
-- * What was dropped is kept here, in the same transaction as the drop: each index's name, its
--   table, the statement that makes it and its row of sqlite_stat1 (which DROP INDEX deletes).
--   Building them again runs each statement, puts the statistics back and empties this table,
--   in one transaction.
-- * A reader during such an import reads the same rows; a question by uid, offset, kind or state
--   reads the span tables without those indexes until the import ends. An import that is killed
--   leaves the rows here: the next memstate that opens the file for writing builds the indexes
--   first. `SELECT name FROM deferred_index` shows whether any index is waiting.

CREATE TABLE deferred_index (
    name TEXT PRIMARY KEY,
    tbl  TEXT NOT NULL,
    sql  TEXT NOT NULL,
    stat TEXT
);
