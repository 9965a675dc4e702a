//! memstate: import memory state dumps of a task runtime (Legion/Realm, Legate) into a versioned
//! SQLite database and answer questions about holes, fragmentation and live allocations, for one
//! snapshot and across a run.
//!
//! The modules follow the design's rooms:
//!
//! - [`dump`]: format v1, its reader, validator and writer; [`source`]: the foreign inputs
//!   (Legate and Realm logs, PyTorch allocator snapshots) turned into dumps of format v1.
//! - [`ingest`]: the import and validate pipelines; [`follow`]: `import --follow`;
//!   [`shards`]: one database per (run, node).
//! - [`db`]: the database (opening, migrations, writing an imported dump, removing).
//! - [`query`]: reading the database (canned queries, loaders, selectors, history) and its
//!   output formats; [`analysis`]: answers computed from what was loaded; [`story`]: why a
//!   request failed, told from those answers.
//! - [`viz`]: memory maps and trend charts; [`export`]: the Parquet dataset; [`files`]: files
//!   written for people, whole or not at all.
//! - [`sim`]: the simulator that writes realistic dumps; [`units`]: sizes and figures as people
//!   read them; [`error`]: the library's error type.
//!
//! Only the binary's CLI knows about all of them.

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
