//! The integration tests: one crate, one module per area.

mod common;
mod figures;
mod reader;
