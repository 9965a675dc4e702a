//! memstate: import memory state dumps of a task runtime (Legion/Realm, Legate) into a versioned
//! SQLite database and answer questions about holes, fragmentation and live allocations, for one
//! snapshot and across a run.
//!
//! The modules follow the design's rooms: [`dump`] (the format and its reader), [`db`] (the
//! database: opening, migrations, import), [`query`] (ad hoc SQL and output formats), [`sim`] (the simulator that writes realistic dumps), [`viz`] (memory maps and trend charts). Only the
//! binary's CLI knows about all of them.

pub mod analysis;
pub mod db;
pub mod dump;
pub mod error;
pub mod export;
pub mod files;
pub mod follow;
pub mod ingest;
pub mod query;
pub mod shards;
pub mod sim;
pub mod source;
pub mod story;
pub mod units;
pub mod viz;

pub use error::{Error, Result};
