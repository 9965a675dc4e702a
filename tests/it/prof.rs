//! Legion Prof profiles as a source (issue 47): hand-built profiles in the header form Legate
//! 26.06 writes (figures worked out by hand here), and the real profiles of
//! tests/data/legion-prof (Legate 26.06 and 25.03 from PyPI; how they were made is in its
//! README.md), checked against a second, simpler reader of the records written in this file.

use std::path::{Path, PathBuf};

use crate::common::{import, on_db};

pub(crate) const KIB: u64 = 1024;
pub(crate) const SYSTEM_MEM: u64 = 0x1e00_0000_0000_0000;

/// Record formats as the Legate 26.06 profile's header declares them (its MachineDesc has no
/// `version`; ProcDesc a uuid; PhysicalInstanceUsage a `redop` written only after mode 4).
pub(crate) const FORMATS: &[&str] = &[
    "ProcDesc {id:6, proc_id:ProcID:8, kind:ProcKind:4, uuid_size:uuid_size:4, cuda_device_uuid:uuid:1}",
    "MemDesc {id:7, mem_id:MemID:8, kind:MemKind:4, capacity:unsigned long long:8}",
    "MaxDimDesc {id:8, max_dim:maxdim:4}",
    "MachineDesc {id:10, node_id:unsigned:4, num_nodes:unsigned:4, hostname:string:-1, host_id:unsigned long long:8, process_id:unsigned:4}",
    "InstTimelineInfo {id:22, inst_uid:unsigned long long:8, inst_id:InstID:8, mem_id:MemID:8, size:unsigned long long:8, op_id:UniqueID:8, create:timestamp_t:8, ready:timestamp_t:8, destroy:timestamp_t:8, creator:unsigned long long:8}",
    "IndexSpaceRectDesc {id:33, unique_id:unsigned long long:8, dim:unsigned:4, rem:array:8}",
    "PhysicalInstanceUsage {id:46, inst_uid:unsigned long long:8, fevent:unsigned long long:8, op_id:UniqueID:8, start:timestamp_t:8, stop:timestamp_t:8, index_expr:unsigned long long:8, field:unsigned:4, index:unsigned:4, mode:unsigned:4, redop:unsigned:4}",
];

/// A profile written byte by byte: the header, then records by hand.
pub(crate) struct Profile {
    pub(crate) bytes: Vec<u8>,
}

impl Profile {
    pub(crate) fn new(formats: &[&str]) -> Profile {
        let mut text = String::from(
            "FileType: BinaryLegionProf v: 1011\nlegion-25.12.0-75-g7b770cff5-dirty\n",
        );
        for format in formats {
            text.push_str(format);
            text.push('\n');
        }
        text.push('\n');
        Profile {
            bytes: text.into_bytes(),
        }
    }

    pub(crate) fn id(&mut self, id: u32) -> &mut Self {
        self.bytes.extend_from_slice(&id.to_le_bytes());
        self
    }
    pub(crate) fn u32(&mut self, value: u32) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, value: u64) -> &mut Self {
        self.bytes.extend_from_slice(&value.to_le_bytes());
        self
    }
    pub(crate) fn text(&mut self, value: &str) -> &mut Self {
        self.bytes.extend_from_slice(value.as_bytes());
        self.bytes.push(0);
        self
    }

    pub(crate) fn machine(&mut self, node: u32) -> &mut Self {
        self.id(10).u32(node).u32(2).text("host").u64(7).u32(1234)
    }
    pub(crate) fn memory(&mut self, id: u64, kind: u32, capacity: u64) -> &mut Self {
        self.id(7).u64(id).u32(kind).u64(capacity)
    }
    /// An instance of `size` KiB asked for at `create`, placed at `ready`, destroyed at `destroy`.
    pub(crate) fn instance(
        &mut self,
        uid: u64,
        size: u64,
        create: u64,
        ready: u64,
        destroy: u64,
    ) -> &mut Self {
        self.id(22)
            .u64(uid)
            .u64(0x4000_0000_0000_0000 | uid)
            .u64(SYSTEM_MEM)
            .u64(size * KIB)
            .u64(5)
            .u64(create)
            .u64(ready)
            .u64(destroy)
            .u64(0)
    }
    /// Records memstate reads past: a processor with a 16-byte uuid, a rectangle of max_dim 2,
    /// and two usages, one read-write (no redop written) and one reduction (redop written).
    pub(crate) fn others(&mut self) -> &mut Self {
        self.id(6).u64(0x1d00_0000_0000_0001).u32(1).u32(16);
        self.bytes.extend_from_slice(&[0xab; 16]);
        self.id(8).u32(2);
        self.id(33).u64(9).u32(2).u64(0).u64(0).u64(9).u64(9);
        self.usage(7);
        self.usage(4).u32(46)
    }

    /// A PhysicalInstanceUsage with privilege `mode` (its `redop`, if any, written after).
    pub(crate) fn usage(&mut self, mode: u32) -> &mut Self {
        self.id(46).u64(1).u64(2).u64(3).u64(4).u64(5).u64(6);
        self.u32(10001).u32(0).u32(mode)
    }

    pub(crate) fn write(&self, path: &Path) -> PathBuf {
        std::fs::write(path, &self.bytes).unwrap();
        path.to_path_buf()
    }
}

/// `import` with these options, which must succeed.
pub(crate) fn import_with(db: &Path, options: &[&str], path: &Path) {
    let output = on_db(db)
        .arg("import")
        .args(options)
        .arg(path)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{said}");
}

pub(crate) fn rows(db: &Path, sql: &str) -> Vec<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut statement = conn.prepare(sql).unwrap();
    let columns = statement.column_count();
    statement
        .query_map([], |row| {
            Ok((0..columns)
                .map(|at| match row.get_ref(at).unwrap() {
                    rusqlite::types::ValueRef::Null => "NULL".to_string(),
                    rusqlite::types::ValueRef::Integer(value) => value.to_string(),
                    rusqlite::types::ValueRef::Real(value) => value.to_string(),
                    rusqlite::types::ValueRef::Text(text) => {
                        String::from_utf8_lossy(text).into_owned()
                    }
                    rusqlite::types::ValueRef::Blob(_) => "blob".to_string(),
                })
                .collect::<Vec<_>>()
                .join("|"))
        })
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// One memory of 1 MiB. A: 256 KiB placed at 100, destroyed at 400. B: 512 KiB, 200 to 300.
/// C: 128 KiB asked for at 250, placed at 300 (it waited for B's bytes), destroyed at 500. The
/// live sets change at 100, 200, 300, 400 and 500: a snapshot after each, with A (256 KiB);
/// A and B (768 KiB, the peak); A and C (384 KiB: B gone at 300, C placed then); C (128 KiB);
/// nothing. C, asked for at 250, holds nothing before 300.
fn small(dir: &Path, node: u32) -> PathBuf {
    let mut profile = Profile::new(FORMATS);
    profile
        .machine(node)
        .others()
        .memory(SYSTEM_MEM, 2, 1024 * KIB)
        .memory(0x1e00_0000_0000_0001, 2, 0)
        .instance(1, 256, 90, 100, 400)
        .instance(2, 512, 200, 200, 300)
        .instance(3, 128, 250, 300, 500);
    profile.write(&dir.join(format!("legate_{node}.prof")))
}

#[test]
fn live_instances_and_bytes_at_each_change_worked_out_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("p.db");
    import(&db, &[&small(dir.path(), 0)], 0);
    // The run is the file's name without its node; a memory of capacity 0 is not drawn.
    assert_eq!(
        rows(&db, "SELECT run, node, seq, time_ns, kind, capacity, used_bytes, free_bytes, coalesce(largest_hole, 'unknown'), unknown FROM memory_trend ORDER BY seq"),
        [
            "legate|0|0|100|SYSTEM_MEM|1048576|262144|786432|unknown|placement",
            "legate|0|1|200|SYSTEM_MEM|1048576|786432|262144|unknown|placement",
            "legate|0|2|300|SYSTEM_MEM|1048576|393216|655360|unknown|placement",
            "legate|0|3|400|SYSTEM_MEM|1048576|131072|917504|unknown|placement",
            "legate|0|4|500|SYSTEM_MEM|1048576|0|1048576|unknown|placement",
        ]
    );
    // Each instance by its handle (the instance id), valid, created when it was asked for.
    assert_eq!(
        rows(&db, "SELECT handle, size, state, created_ns, first_seq, last_seq FROM allocation_spans ORDER BY created_ns"),
        [
            "0x4000000000000001|262144|valid|90|0|2",
            "0x4000000000000002|524288|valid|200|1|1",
            "0x4000000000000003|131072|valid|250|2|3",
        ]
    );
    // The peak (768 KiB at 200) is a snapshot, and its note says so.
    let peak = rows(&db, "SELECT seq, note FROM snapshots WHERE note LIKE '%the peak of SYSTEM_MEM 0x1e00000000000000%'");
    assert_eq!(peak.len(), 1, "{peak:?}");
    assert!(
        peak[0].starts_with("1|from a Legion Prof profile; written by legion-25.12.0"),
        "{peak:?}"
    );
    // What the profile cannot say stays unknown in the story too.
    let story = on_db(&db).args(["map"]).output().unwrap();
    assert_eq!(
        story.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&story.stderr)
    );
}

#[test]
fn past_two_hundred_changes_snapshots_are_regular_and_the_peak_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = Profile::new(FORMATS);
    profile.machine(0).memory(SYSTEM_MEM, 2, 1 << 30);
    // 300 instances of 1 KiB, one placed every 10 ns from 0 and each destroyed 15 ns later
    // (two live at once), and one of 64 KiB live only from 1,234 to 1,236: the peak.
    for k in 0..300u64 {
        profile.instance(k + 1, 1, k * 10, k * 10, k * 10 + 15);
    }
    profile.instance(1000, 64, 1234, 1234, 1236);
    let file = profile.write(&dir.path().join("legate_0.prof"));
    let db = dir.path().join("p.db");
    import(&db, &[&file], 0);
    // Changes from 0 to 3,005: 200 snapshots a step of ceil(3005 / 200) = 16 ns apart (0 to
    // 3,184 by 16: 188 of them to 2,992, and the last change, 3,005), plus the peak at 1,234.
    let times = rows(&db, "SELECT time_ns FROM snapshots ORDER BY seq");
    assert_eq!(times.len(), 188 + 1 + 1, "{times:?}");
    assert!(times.contains(&"1234".to_string()));
    assert_eq!(times.last().map(String::as_str), Some("3005"));
    assert_eq!(
        rows(&db, "SELECT max(used_bytes) FROM memory_trend"),
        [(64 * KIB + 2 * KIB).to_string()]
    );
    // --prof-step chooses the step: every 1 us over 3,005 ns is 4 snapshots, the last change
    // and the peak.
    let stepped = dir.path().join("s.db");
    import_with(&stepped, &["--prof-step", "1us"], &file);
    assert_eq!(
        rows(&stepped, "SELECT time_ns FROM snapshots ORDER BY seq"),
        ["0", "1000", "1234", "2000", "3000", "3005"]
    );
}

#[test]
fn two_nodes_land_in_one_run_and_a_folder_is_read_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("logs");
    std::fs::create_dir(&folder).unwrap();
    small(&folder, 0);
    // Node 1's file, gzipped under the name -lg:prof gives it.
    let plain = small(dir.path(), 1);
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut encoder, &std::fs::read(plain).unwrap()).unwrap();
    std::fs::write(folder.join("legate_1.prof"), encoder.finish().unwrap()).unwrap();
    let db = dir.path().join("p.db");
    import(&db, &[&folder], 0);
    assert_eq!(
        rows(
            &db,
            "SELECT run, node, count(*), max(used_bytes) FROM memory_trend GROUP BY run, node"
        ),
        ["legate|0|5|786432", "legate|1|5|786432"]
    );
}

#[test]
fn a_profile_cut_short_or_declared_otherwise_is_refused_by_place() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(small(dir.path(), 0)).unwrap();
    let header = whole.windows(2).position(|pair| pair == b"\n\n").unwrap() + 2;
    let refused = |name: &str, bytes: &[u8]| -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let output = on_db(dir.path().join(format!("{name}.db")))
            .arg("import")
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(1),
            "{name}: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // Cut inside the last instance record (each is 4 + 72 bytes): the offset of its start.
    let cut = refused("cut_0.prof", &whole[..whole.len() - 10]);
    let last = whole.len() - 76;
    assert!(
        cut.contains(&format!(
            "byte offset {last}: the file ends inside a InstTimelineInfo record"
        )),
        "{cut}"
    );
    // A record id the header does not declare.
    let mut stray = whole.clone();
    stray.extend_from_slice(&99u32.to_le_bytes());
    let said = refused("stray_0.prof", &stray);
    assert!(
        said.contains(&format!(
            "byte offset {}: record id 99 is not declared",
            whole.len()
        )),
        "{said}"
    );
    // A header whose MemDesc has no capacity.
    let text =
        String::from_utf8_lossy(&whole[..header]).replace(", capacity:unsigned long long:8", "");
    let mut otherwise = text.into_bytes();
    otherwise.extend_from_slice(&whole[header..]);
    let said = refused("otherwise_0.prof", &otherwise);
    assert!(
        said.contains("the header declares MemDesc without its field capacity"),
        "{said}"
    );
    // Nothing of any of them was imported.
    for name in ["cut_0.prof", "stray_0.prof", "otherwise_0.prof"] {
        let db = dir.path().join(format!("{name}.db"));
        if db.exists() {
            assert_eq!(rows(&db, "SELECT count(*) FROM snapshots"), ["0"]);
        }
    }
}

#[test]
fn a_release_that_adds_fields_is_read_by_its_header() {
    let dir = tempfile::tempdir().unwrap();
    // A later release that puts a field before the sizes and a string at the end of every
    // instance record, and declares its memories with the kind last.
    let formats: Vec<String> = FORMATS
        .iter()
        .map(|format| {
            format
                .replace(
                    "inst_id:InstID:8, ",
                    "inst_id:InstID:8, colour:unsigned:4, ",
                )
                .replace(
                    "creator:unsigned long long:8}",
                    "creator:unsigned long long:8, origin:string:-1}",
                )
                .replace(
                    "kind:MemKind:4, capacity:unsigned long long:8",
                    "capacity:unsigned long long:8, kind:MemKind:4",
                )
        })
        .collect();
    let formats: Vec<&str> = formats.iter().map(String::as_str).collect();
    let mut profile = Profile::new(&formats);
    profile.machine(3);
    profile.id(7).u64(SYSTEM_MEM).u64(1024 * KIB).u32(2);
    for (uid, size, ready, destroy) in [(1u64, 256u64, 100u64, 400u64), (2, 512, 200, 300)] {
        profile
            .id(22)
            .u64(uid)
            .u64(0x4000_0000_0000_0000 | uid)
            .u32(0xc0)
            .u64(SYSTEM_MEM)
            .u64(size * KIB)
            .u64(5)
            .u64(ready)
            .u64(ready)
            .u64(destroy)
            .u64(0)
            .text("a later field");
    }
    let file = profile.write(&dir.path().join("later_3.prof"));
    let db = dir.path().join("p.db");
    import(&db, &[&file], 0);
    assert_eq!(
        rows(
            &db,
            "SELECT run, node, time_ns, used_bytes, capacity FROM memory_trend ORDER BY seq"
        ),
        [
            "later|3|100|262144|1048576",
            "later|3|200|786432|1048576",
            "later|3|300|262144|1048576",
            "later|3|400|0|1048576",
        ]
    );
}

#[test]
fn a_profile_without_instance_records_says_so_and_imports_its_memories() {
    let dir = tempfile::tempdir().unwrap();
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/legion-prof/26.06/oom/legate_0.prof");
    let db = dir.path().join("p.db");
    import(&db, &[&real], 0);
    let said = rows(&db, "SELECT count(*), max(note) FROM snapshots");
    assert!(said[0].starts_with("1|"), "{said:?}");
    assert!(said[0].contains("it holds no instance records"), "{said:?}");
    // Its one memory with a capacity: 16 MiB of system memory (--sysmem 16), nothing live.
    assert_eq!(
        rows(&db, "SELECT kind, capacity, used_bytes FROM memory_trend"),
        ["SYSTEM_MEM|16777216|0"]
    );
}

/// A second, simpler reader for the checks on real profiles: walks the records by the header's
/// declared sizes (strings to their NUL, arrays by max_dim, uuids by uuid_size, redop only after
/// mode 4) and returns each InstTimelineInfo as (size, ready, destroy) and the MemDesc capacities.
fn walk(bytes: &[u8]) -> (Vec<(u64, u64, u64)>, Vec<u64>) {
    let end = bytes.windows(2).position(|pair| pair == b"\n\n").unwrap();
    let header = std::str::from_utf8(&bytes[..end]).unwrap();
    let mut layouts = std::collections::HashMap::new();
    for line in header.lines().filter(|line| line.contains(" {id:")) {
        let (name, rest) = line.split_once(" {id:").unwrap();
        let mut items = rest.trim_end_matches('}').split(", ");
        let id: u32 = items.next().unwrap().parse().unwrap();
        let fields: Vec<(String, String, i64)> = items
            .map(|item| {
                let parts: Vec<&str> = item.split(':').collect();
                (
                    parts[0].to_string(),
                    parts[1].to_string(),
                    parts[2].parse().unwrap(),
                )
            })
            .collect();
        layouts.insert(id, (name.to_string(), fields));
    }
    let (mut at, mut max_dim, mut instances, mut capacities) =
        (end + 2, 0usize, Vec::new(), Vec::new());
    let number = |at: usize, size: usize| -> u64 {
        let mut wide = [0u8; 8];
        wide[..size.min(8)].copy_from_slice(&bytes[at..at + size.min(8)]);
        u64::from_le_bytes(wide)
    };
    while at < bytes.len() {
        let id = number(at, 4) as u32;
        at += 4;
        let (name, fields) = &layouts[&id];
        let mut values = std::collections::HashMap::new();
        let mut uuid = 0;
        for (field, kind, size) in fields {
            if field == "redop" && values.get("mode") != Some(&4) {
                continue;
            }
            let length = match (kind.as_str(), *size) {
                (_, -1) => bytes[at..].iter().position(|&byte| byte == 0).unwrap() + 1,
                ("array", size) => 2 * max_dim * size as usize,
                ("point", size) => max_dim * size as usize,
                ("uuid", _) => uuid,
                (_, size) => size as usize,
            };
            if *size > 0 && length <= 8 {
                values.insert(field.as_str(), number(at, length));
            }
            if kind == "uuid_size" {
                uuid = number(at, 4) as usize;
            }
            if kind == "maxdim" {
                max_dim = number(at, 4) as usize;
            }
            at += length;
        }
        match name.as_str() {
            "InstTimelineInfo" => {
                instances.push((values["size"], values["ready"], values["destroy"]))
            }
            "MemDesc" if values["capacity"] > 0 => capacities.push(values["capacity"]),
            _ => {}
        }
    }
    (instances, capacities)
}

#[test]
fn real_profiles_under_pressure_show_collection_and_match_a_second_reader() {
    for (release, full) in [("26.06", true), ("25.03", false)] {
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!(
            "tests/data/legion-prof/{release}/pressure/legate_0.prof"
        ));
        let (instances, capacities) = walk(&std::fs::read(&real).unwrap());
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("p.db");
        import(&db, &[&real], 0);
        // Every instance the second reader finds, once, with its size.
        let mut sizes: Vec<u64> = instances.iter().map(|instance| instance.0).collect();
        sizes.sort_unstable();
        let mut imported: Vec<u64> =
            rows(&db, "SELECT max(size) FROM allocation_spans GROUP BY uid")
                .iter()
                .map(|size| size.parse().unwrap())
                .collect();
        imported.sort_unstable();
        assert_eq!(imported, sizes, "{release}");
        // The peak, swept from the second reader's lives (placed at ready, gone at destroy).
        let mut events: Vec<(u64, i64)> = instances
            .iter()
            .flat_map(|&(size, ready, destroy)| [(ready, size as i64), (destroy, -(size as i64))])
            .collect();
        events.sort_unstable();
        let (mut live, mut peak) = (0i64, 0i64);
        for (_, bytes) in events {
            live += bytes;
            peak = peak.max(live);
        }
        assert_eq!(
            rows(&db, "SELECT max(used_bytes) FROM memory_trend"),
            [peak.to_string()],
            "{release}"
        );
        // Collection under pressure: instances destroyed while others are placed later on.
        let collected = rows(&db, "SELECT count(*) FROM allocation_spans a WHERE a.last_seq < (SELECT max(first_seq) FROM allocation_spans)");
        assert!(
            collected[0].parse::<u64>().unwrap() >= 10,
            "{release}: {collected:?}"
        );
        // The memory is its --sysmem (32 MiB). Legate 26.06's profile fills it exactly at its
        // peak; 25.03's records hold more than that at once (an instance ready before the one
        // whose bytes it takes is destroyed), so there the capacity is said unknown.
        assert_eq!(capacities.iter().max(), Some(&(32 << 20)), "{release}");
        let over = rows(
            &db,
            "SELECT count(*) FROM memory_trend WHERE unknown LIKE '%capacity%'",
        );
        assert_eq!(peak == 32 << 20, full, "{release}: peak {peak}");
        assert_eq!(over[0] == "0", full, "{release}: {over:?}");
    }
}

/// A run that ran out of memory: Legate's report in its log (at 0.648297 s on Realm's clock,
/// line 3 of legate.log) and a profile with no instance records (Legion had not flushed them).
/// Imported together with --seq-by time they land in one run and node in time order: the
/// profile's snapshot (time 0) before the failure (seq 648297000, its time in nanoseconds), which
/// `oom` then tells with that snapshot before it. Numbered by file, both are seq 0: refused, with
/// the way out said.
#[test]
fn a_profile_and_its_log_land_in_one_run_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/legion-prof/26.06/oom");
    let db = dir.path().join("p.db");
    import_with(&db, &["--run", "job", "--seq-by", "time"], &folder);
    assert_eq!(
        rows(&db, "SELECT run, node, seq, reason, source LIKE '%legate_0.prof:1' FROM snapshots ORDER BY seq"),
        ["job|0|0|periodic|1", "job|0|648297000|oom|0"]
    );
    let story = on_db(&db).args(["oom"]).output().unwrap();
    let told = String::from_utf8_lossy(&story.stdout);
    assert!(
        told.contains("Out of memory in job node 0 seq 648297000"),
        "{told}"
    );
    assert!(told.contains("since seq 0"), "{told}");
    let by_file = dir.path().join("f.db");
    let output = on_db(&by_file)
        .args(["import", "--run", "job"])
        .arg(&folder)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("import them with --seq-by time"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
