//! memstate: import memory state dumps of a task runtime (Legion/Realm, Legate) into a versioned
//! SQLite database and answer questions about holes, fragmentation and live allocations, for one
//! snapshot and across a run.
//!
//! The modules follow the design's rooms:
//!
//! - [`import`]: getting inputs in: the inputs on disk and their I/O, the foreign formats (Legate
//!   and Realm logs, PyTorch allocator snapshots) turned into dumps, the import and validate
//!   pipelines, `import --follow`, one database per (run, node).
//! - [`dump`]: format v1, pure: its model, parser and validator, writer and figures.
//! - [`db`]: the database (opening, migrations, writing an imported dump, removing).
//! - [`query`]: reading the database (canned queries and their typed parameters, the units
//!   declared with the views' and queries' columns, loaders, selectors, history, Datasette
//!   metadata, and the one loader of a story's and a page's context); [`analysis`]: answers computed from what was loaded; [`story`]: why a request
//!   failed, told from those answers (it reads nothing itself).
//! - [`present`]: how results leave: tables for people, the exact formats registered as row
//!   writers (csv, json, ndjson), prose fitted to the terminal.
//! - [`serve`]: the live explorer over HTTP (`memstate serve`), answering what `query` reads
//!   and rendering with `present` and `viz`.
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
pub mod import;
pub mod present;
pub mod query;
pub mod serve;
pub mod sim;
pub mod story;
pub mod units;
pub mod viz;

pub use error::{Error, Result};
