//! A dump's call stacks as database ids: each frame (file, line, name) and each distinct stack
//! stored once per database, however many dumps and allocations share them (a PyTorch trace
//! rebuilt into a thousand snapshots carries the same stacks in each).

use rusqlite::{params, Connection, OptionalExtension};

use crate::dump::Dump;

/// The database id of each of the dump's stacks, in the order of `dump.stacks`, given the
/// database ids of the dump's strings.
pub(super) fn stack_ids(tx: &Connection, dump: &Dump, ids: &[i64]) -> rusqlite::Result<Vec<i64>> {
    if dump.stacks.is_empty() {
        return Ok(Vec::new());
    }
    let sym = |sym: crate::dump::Sym| ids[sym.0 as usize];
    let mut frame = tx.prepare_cached(
        "INSERT INTO frame (file, line, name) VALUES (?1, ?2, ?3)
         ON CONFLICT (file, line, name) DO UPDATE SET line = excluded.line RETURNING id",
    )?;
    let frame_ids = dump
        .frames
        .iter()
        .map(|found| {
            frame.query_row(
                params![
                    sym(found.file),
                    found.line.unwrap_or(-1),
                    found.name.map_or(0, sym)
                ],
                |row| row.get::<_, i64>(0),
            )
        })
        .collect::<rusqlite::Result<Vec<i64>>>()?;
    let mut find = tx.prepare_cached("SELECT id FROM stack WHERE frames = ?1")?;
    let mut insert = tx.prepare_cached("INSERT INTO stack (frames) VALUES (?1) RETURNING id")?;
    let mut insert_frame = tx.prepare_cached(
        "INSERT INTO stack_frame (stack_id, depth, frame_id) VALUES (?1, ?2, ?3)",
    )?;
    let mut found = Vec::with_capacity(dump.stacks.len());
    let mut text = String::new();
    for stack in &dump.stacks {
        let frames: Vec<i64> = stack
            .iter()
            .map(|&index| frame_ids.get(index as usize).copied().unwrap_or(0))
            .collect();
        text.clear();
        for (depth, id) in frames.iter().enumerate() {
            if depth > 0 {
                text.push(',');
            }
            text.push_str(&id.to_string());
        }
        let id = match find
            .query_row([&text], |row| row.get::<_, i64>(0))
            .optional()?
        {
            Some(id) => id,
            None => {
                let id: i64 = insert.query_row([&text], |row| row.get(0))?;
                for (depth, frame_id) in frames.iter().enumerate() {
                    insert_frame.execute(params![id, depth as i64, frame_id])?;
                }
                id
            }
        };
        found.push(id);
    }
    Ok(found)
}
