//! The forecast of one snapshot's memories, read from `memory_forecast` (migration V7, which
//! says how it is worked out): what `import --follow` warns about as dumps land.

use rusqlite::{params, Connection};

use super::query_error;
use crate::error::Result;

/// One memory's forecast at one snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecast {
    pub memory_id: i64,
    pub handle: String,
    pub kind: String,
    /// The largest hole now (None when unknown).
    pub largest_hole: Option<u64>,
    /// Bytes per dump the largest hole moves (None with fewer than 3 dumps of known holes).
    pub hole_trend: Option<f64>,
    /// The largest allocation that appeared or request that failed in the last 8 dumps.
    pub largest_request: u64,
    /// Dumps until the largest hole falls below `largest_request` (None: not falling, or unknown).
    pub dumps_left: Option<u64>,
    /// The same at the memory's previous dump.
    pub dumps_left_before: Option<u64>,
}

impl Forecast {
    /// Whether the forecast says, at this dump and the one before, that the largest hole falls
    /// below the largest recent request within `within` dumps (one dip is not a trend).
    pub fn warns(&self, within: u64) -> bool {
        self.dumps_left.is_some_and(|left| left <= within)
            && self.dumps_left_before.is_some_and(|left| left <= within)
    }

    /// Whether the largest hole is known and not falling: a warning said of it is over.
    pub fn recovered(&self) -> bool {
        self.dumps_left.is_none() && self.hole_trend.is_some() && self.largest_hole.is_some()
    }
}

/// The forecast of every memory of `snapshot_id`.
pub fn at_snapshot(conn: &Connection, snapshot_id: i64) -> Result<Vec<Forecast>> {
    let mut statement = conn
        .prepare(
            "SELECT memory_id, handle, kind, largest_hole, hole_trend, largest_request, dumps_left,
                    dumps_left_before
             FROM memory_forecast WHERE snapshot_id = ?1 ORDER BY memory_id",
        )
        .map_err(query_error)?;
    let rows = statement
        .query_map(params![snapshot_id], |row| {
            let unsigned = |value: Option<i64>| value.map(|value| value.max(0) as u64);
            Ok(Forecast {
                memory_id: row.get(0)?,
                handle: row.get(1)?,
                kind: row.get(2)?,
                largest_hole: unsigned(row.get(3)?),
                hole_trend: row.get(4)?,
                largest_request: unsigned(row.get(5)?).unwrap_or(0),
                dumps_left: unsigned(row.get(6)?),
                dumps_left_before: unsigned(row.get(7)?),
            })
        })
        .map_err(query_error)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(query_error)?;
    Ok(rows)
}
