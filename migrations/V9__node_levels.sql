-- Why: a question about one snapshot searched every span level of every memory it read: 34
-- searches a memory in `allocations` and 34 in `holes`, most of them of levels that cannot hold
-- a span of that node. One snapshot of 40,000 memories paid 2.7 million searches for 800,000
-- rows (`memstate blockers` took 3 s, against 2 s wanted).
--
-- * A closed span of a node lasts at most from the node's first seq to its last, so its level is
--   at most the level of that stretch (the smallest L with last - first < 4^L, as in version 2).
--   Each snapshot row now carries that level of its node, `top_level`; the views search the
--   levels up to it, and the open level (64), and skip the rest without a search. A run of 1,000
--   snapshots with seqs 0 to 999 has levels 0 to 5 and 64: 7 searches a memory, not 34.
-- * The importer sets it on the new snapshot's row and, when the node's stretch grows into a
--   higher level (a few times in a run, as the stretch passes 4, 16, 64 ... seqs), on every row
--   of the node; removing a snapshot sets it again. It depends only on which snapshots a node
--   has, so any import order gives the same value. The default, 32 (every closed level), is
--   right for any row, only slower.
-- * The test is written `v.level % 64 <= s.top_level` (the open level reads as 0) rather than
--   with an OR: SQLite plans an OR on span_level's key as two searches of it, and then reads
--   GROUP BY state over a whole run through a sort of every row instead of the state index.
-- * The index of snapshots by node and seq carries the top level too: a whole-run GROUP BY
--   state reads each span's snapshots from it, and without the column it read every such
--   snapshot's row as well (3.1 s instead of 2.0 s on the scale bench's 10M-row run, in the
--   sqlite3 shell). The level test still costs a little there, where every span passes it: about
--   8% with the bundled SQLite, 18% in the shell, on that run.
-- * The views keep their names, columns and rows.

ALTER TABLE snapshot ADD COLUMN top_level INTEGER NOT NULL DEFAULT 32;

-- The stretch as two searches of the index, each one probe: max() and min() in one SELECT would
-- read every snapshot of the node for every snapshot of it.
UPDATE snapshot
SET top_level = (SELECT min(v.level) FROM span_level v
                 WHERE v.reach >= (SELECT max(t.seq) FROM snapshot t
                                   WHERE t.run_id = snapshot.run_id AND t.node = snapshot.node)
                                - (SELECT min(t.seq) FROM snapshot t
                                   WHERE t.run_id = snapshot.run_id AND t.node = snapshot.node));

DROP INDEX snapshot_by_node_seq;
CREATE INDEX snapshot_by_node_seq ON snapshot (run_id, node, seq, id, time_ns, ordinal, top_level);
DELETE FROM sqlite_stat1 WHERE idx = 'snapshot_by_node_seq';
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES ('snapshot', 'snapshot_by_node_seq', '1000 1000 1000 1 1 1 1 1');

DROP VIEW allocations;
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
       coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = s.run_id AND t.node = s.node)) AS span_last_seq
FROM snapshot s
JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
JOIN span_level v ON v.level % 64 <= s.top_level
JOIN allocation_span a ON a.memory_id = m.id AND a.level = v.level
                      AND a.first_seq BETWEEN s.seq - v.reach AND s.seq
                      AND s.seq <= coalesce(a.last_seq, 9223372036854775807);

DROP VIEW holes;
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
