//! Legion Prof profiles held to the bound every other source keeps (issue 59, items 10 to 12):
//! a process peak within 4 times the decompressed input and 64 MiB whatever the declared layout,
//! output that grows with the input and not with its memories squared, and instance ids repeated
//! while live told as such and kept apart. Peaks are the import's own VmHWM, read while it runs.

use std::io::Write;
use std::path::Path;

use crate::common::{import, on_db};
use crate::hardening::{binary, peak_mib};
use crate::prof::{import_with, rows, Profile, FORMATS, KIB, SYSTEM_MEM};

/// `memstate --db DB`, as a plain command (for its peak memory).
fn memstate(db: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(binary());
    command.env_remove("MEMSTATE_DB").arg("--db").arg(db);
    command
}

/// A header whose instance records are 13 bytes: every field an integer of 1 or 2 bytes, as a
/// header may declare them (the reader reads the layouts it is given).
const TINY: &[&str] = &[
    "MemDesc {id:7, mem_id:MemID:1, kind:MemKind:1, capacity:unsigned long long:8}",
    "InstTimelineInfo {id:22, inst_id:InstID:1, mem_id:MemID:1, size:unsigned:1, create:timestamp_t:2, ready:timestamp_t:2, destroy:timestamp_t:2}",
];

/// A gzipped profile of `count` 13-byte instance records in one memory; its decompressed size.
fn tiny_profile(path: &Path, count: u64) -> u64 {
    let mut head = Profile::new(TINY);
    head.id(7);
    head.bytes.extend_from_slice(&[1, 2]);
    head.u64(1 << 40);
    let file = std::fs::File::create(path).unwrap();
    let mut out = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
    out.write_all(&head.bytes).unwrap();
    let mut total = head.bytes.len() as u64;
    let mut block = Vec::with_capacity(13 * 4096);
    for index in 0..count {
        let create = (index % 60_000) as u16;
        block.extend_from_slice(&22u32.to_le_bytes());
        block.extend_from_slice(&[(index % 251) as u8, 1, 64]);
        block.extend_from_slice(&create.to_le_bytes());
        block.extend_from_slice(&create.to_le_bytes());
        block.extend_from_slice(&(create + 1).to_le_bytes());
        if block.len() >= 13 * 4096 {
            out.write_all(&block).unwrap();
            total += block.len() as u64;
            block.clear();
        }
    }
    out.write_all(&block).unwrap();
    total += block.len() as u64;
    out.finish().unwrap();
    total
}

/// Item 10: 3 million records of 13 bytes (39 MB inside, gzipped) are refused by name, at the
/// record where holding more would pass the bound, within 4 times the input and 64 MiB; the
/// dump size limit applies to a profile too; a 16 MiB header is refused, small.
#[test]
fn a_profile_of_tiny_records_is_refused_by_name_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prof_0.gz");
    let inside = tiny_profile(&path, 3_000_000);
    let (code, peak, stderr) =
        peak_mib(memstate(&dir.path().join("t.db")).arg("import").arg(&path));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("instance records") && stderr.contains("byte offset"),
        "{stderr}"
    );
    let bound = 4.0 * inside as f64 / (1 << 20) as f64 + 64.0;
    assert!(peak < bound, "peak {peak:.0} MiB, bound {bound:.0} MiB");

    // The same records, fewer: imported, within the bound.
    let fewer = dir.path().join("fewer_0.gz");
    let inside = tiny_profile(&fewer, 100_000);
    let (code, peak, stderr) =
        peak_mib(memstate(&dir.path().join("f.db")).arg("import").arg(&fewer));
    assert_eq!(code, 0, "{stderr}");
    let bound = 4.0 * inside as f64 / (1 << 20) as f64 + 64.0;
    assert!(peak < bound, "peak {peak:.0} MiB, bound {bound:.0} MiB");

    // --max-dump-size holds a profile's decompressed bytes too.
    let output = on_db(dir.path().join("m.db"))
        .args(["import", "--max-dump-size", "1000000"])
        .arg(&fewer)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--max-dump-size"), "{said}");

    // A header of 16 MiB (one layout line after another) is refused as such.
    let mut text = String::from("FileType: BinaryLegionProf v: 1011\nlegion-25.12.0\n");
    let mut id = 100;
    while text.len() < 16 << 20 {
        text.push_str(&format!(
            "Filler{id} {{id:{id}, a:unsigned:4, b:unsigned:4, c:unsigned:4, d:unsigned:4}}\n"
        ));
        id += 1;
    }
    text.push('\n');
    let header = dir.path().join("header_0.prof");
    std::fs::write(&header, text).unwrap();
    let (code, peak, stderr) = peak_mib(
        memstate(&dir.path().join("h.db"))
            .arg("import")
            .arg(&header),
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("header is longer"), "{stderr}");
    assert!(
        peak < 64.0 + 4.0 * 16.0,
        "peak {peak:.0} MiB for a 16 MiB header"
    );
}

/// Item 11: 1,200 memories, each with one instance whose peak is its own moment (a profile of
/// about 125 KB): before, a snapshot at every peak, each with every memory (1,201 snapshots, a
/// database of about 100 MB). Now the snapshots' rows stay within the budget (half a row per
/// byte, at least 50,000: each snapshot 64 rows, one per memory and one per live instance), so
/// at most budget / (64 + 1,200 + 1) snapshots, and the note says the other peaks fall
/// between them. (The budget is half a row per byte of profile here: about 63,000 rows, so
/// about 50 snapshots.)
#[test]
fn many_memories_give_snapshots_in_proportion_to_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = Profile::new(FORMATS);
    profile.machine(0);
    let memories: u64 = 1200;
    for memory in 0..memories {
        profile.memory(SYSTEM_MEM + memory, 2, 1024 * KIB);
    }
    for memory in 0..memories {
        // Instance `memory` in memory `memory`, live [10 m + 10, 10 m + 15).
        let start = 10 * memory + 10;
        profile
            .id(22)
            .u64(memory + 1)
            .u64(0x4000_0000_0000_0000 | (memory + 1))
            .u64(SYSTEM_MEM + memory)
            .u64(4 * KIB)
            .u64(5)
            .u64(start)
            .u64(start)
            .u64(start + 5)
            .u64(0);
    }
    let path = profile.write(&dir.path().join("legate_0.prof"));
    let db = dir.path().join("m.db");
    import(&db, &[&path], 0);
    let snapshots: u64 = crate::common::scalar::<i64>(&db, "SELECT count(*) FROM snapshots") as u64;
    let budget = (profile.bytes.len() as u64 / 2).max(50_000);
    let per_snapshot = 64 + memories + 1;
    assert!(
        snapshots >= 2 && snapshots * per_snapshot <= budget + 2 * per_snapshot,
        "{snapshots} snapshots for {memories} memories, a budget of {budget} rows"
    );
    let size = std::fs::metadata(&db).unwrap().len();
    assert!(
        size < 8 << 20,
        "a database of {size} bytes from {} bytes",
        profile.bytes.len()
    );
    let notes = rows(&db, "SELECT note FROM snapshots LIMIT 1");
    assert!(notes[0].contains("fall between snapshots"), "{notes:?}");
}

/// The length of an InstTimelineInfo record of [`FORMATS`]: its id and nine 8-byte fields.
const RECORD: usize = 4 + 9 * 8;

/// Item 12: an instance recorded twice while live (the same inst_uid, the second record a copy
/// of the first) and another id reused while the first lives: every record is kept, the repeats
/// numbered, and the note names the first repeat by its byte offset.
#[test]
fn instance_ids_repeated_while_live_are_kept_apart_and_told() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = Profile::new(FORMATS);
    profile
        .machine(0)
        .memory(SYSTEM_MEM, 2, 1024 * KIB)
        .instance(1, 256, 100, 100, 400);
    let repeat_at = profile.bytes.len();
    profile
        .instance(1, 256, 100, 100, 400)
        .instance(2, 128, 150, 150, 300)
        .instance(2, 64, 200, 200, 250);
    let path = profile.write(&dir.path().join("legate_0.prof"));
    let db = dir.path().join("d.db");
    import(&db, &[&path], 0);
    // At 200 every record is live: 256 + 256 + 128 + 64 KiB.
    assert_eq!(
        rows(
            &db,
            "SELECT used_bytes FROM memory_trend WHERE time_ns = 200"
        ),
        [((256 + 256 + 128 + 64) * KIB).to_string()]
    );
    // The repeats under uids of their own: 0xfe00... plus the record's byte offset.
    let records = [
        (0, 1u64, 256),
        (0, 2, 128),
        (repeat_at, 0, 256),
        (repeat_at + 2 * RECORD, 0, 64),
    ];
    let mut expected: Vec<String> = records
        .iter()
        .map(|&(offset, key, size)| {
            let uid = if offset == 0 {
                key
            } else {
                0xfe00_0000_0000_0000 | offset as u64
            };
            format!("0x{uid:016x}|{}", size * KIB)
        })
        .collect();
    expected.sort();
    let mut found = rows(&db, "SELECT CAST(uid AS TEXT), size FROM allocation_spans");
    found.sort();
    assert_eq!(found, expected);
    let notes = rows(&db, "SELECT note FROM snapshots LIMIT 1");
    assert!(
        notes[0].contains(&format!(
            "2 instance records repeat the id of another live at the same time (the first at byte offset {repeat_at})"
        )),
        "{notes:?}"
    );
}

/// Item 10 too: a profile whose instances are nearly all live at once (120,000 of them, 9 MB)
/// would hold every one of them in each snapshot as it goes through the import, past 4 times
/// its size and 64 MiB: refused by name before any snapshot is made, within the bound.
#[test]
fn a_profile_of_instances_all_live_at_once_is_refused_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = Profile::new(FORMATS);
    profile.machine(0).memory(SYSTEM_MEM, 2, 1 << 40);
    for uid in 1..=120_000u64 {
        // Destroyed "before" it was ready (0): live to the end, as recorded.
        profile.instance(uid, 4, 10 * uid, 10 * uid, 0);
    }
    let path = profile.write(&dir.path().join("legate_0.prof"));
    let (code, peak, stderr) =
        peak_mib(memstate(&dir.path().join("l.db")).arg("import").arg(&path));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("120000 of its instances are live at once"),
        "{stderr}"
    );
    let bound = 4.0 * profile.bytes.len() as f64 / (1 << 20) as f64 + 64.0;
    assert!(peak < bound, "peak {peak:.0} MiB, bound {bound:.0} MiB");
}

/// A folder `logdir` in `dir` holding the log of tests/data/legion-prof/26.06/oom, where a
/// profile is to go beside it.
fn with_the_oom_log(dir: &Path) -> std::path::PathBuf {
    let folder = dir.join("logdir");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/legion-prof/26.06/oom/legate.log"),
        folder.join("legate.log"),
    )
    .unwrap();
    folder
}

/// Item 15: a profile with 60 changes in the microsecond before the log's out-of-memory line
/// (0.648297 s on Realm's clock, tests/data/legion-prof/26.06/oom/legate.log), imported with
/// the log as `--run job --seq-by time`: every snapshot lands (60 after the changes, one for the
/// failure) and each node's seq order is its time order.
#[test]
fn sixty_changes_in_the_microsecond_before_the_failure_all_land_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let folder = with_the_oom_log(dir.path());
    let mut profile = Profile::new(FORMATS);
    profile.machine(0).memory(SYSTEM_MEM, 2, 16 << 20);
    // 30 instances, each placed and destroyed 8 ns later, 16 ns apart: 60 changes in
    // [648,296,000, 648,296,480) ns, all before the failure at 648,297,000 ns.
    for k in 0..30u64 {
        let ready = 648_296_000 + 16 * k;
        profile.instance(k + 1, 64, ready, ready, ready + 8);
    }
    profile.write(&folder.join("legate_0.prof"));
    let db = dir.path().join("t.db");
    import_with(&db, &["--run", "job", "--seq-by", "time"], &folder);
    let by_seq = rows(
        &db,
        "SELECT time_ns FROM snapshots WHERE node = 0 ORDER BY seq",
    );
    assert_eq!(by_seq.len(), 61, "{by_seq:?}");
    let mut by_time: Vec<i64> = by_seq.iter().map(|time| time.parse().unwrap()).collect();
    let in_seq_order = by_time.clone();
    by_time.sort();
    by_time.dedup();
    assert_eq!(in_seq_order, by_time, "seq order is not time order");
    assert_eq!(by_time.last(), Some(&648_297_000));
}

/// Item 15 too: a profile change at the very nanosecond of the log's failure (648,297,000 ns),
/// and one a nanosecond later. The inputs of one import share their seqs: the second to ask for
/// 648,297,000 gets the next free nanosecond, so all three land, in time order.
#[test]
fn a_profile_change_at_the_failures_nanosecond_lands_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let folder = with_the_oom_log(dir.path());
    let mut profile = Profile::new(FORMATS);
    profile.machine(0).memory(SYSTEM_MEM, 2, 16 << 20).instance(
        1,
        64,
        648_297_000,
        648_297_000,
        648_297_002,
    );
    profile.write(&folder.join("legate_0.prof"));
    let db = dir.path().join("t.db");
    import_with(&db, &["--run", "job", "--seq-by", "time"], &folder);
    let by_seq = rows(
        &db,
        "SELECT time_ns, reason FROM snapshots WHERE node = 0 ORDER BY seq",
    );
    assert_eq!(by_seq.len(), 3, "{by_seq:?}");
    let times: Vec<i64> = by_seq
        .iter()
        .map(|row| row.split('|').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|pair| pair[0] <= pair[1]),
        "{by_seq:?}"
    );
    assert!(by_seq.iter().any(|row| row.ends_with("|oom")), "{by_seq:?}");
}
