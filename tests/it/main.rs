//! The integration tests: one crate, one module per area.

mod cli;
mod common;
mod db;
mod figures;
mod reader;
mod schema;
mod sim;
