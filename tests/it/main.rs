//! The integration tests: one crate, one module per area.

mod analysis;
mod cli;
mod common;
mod dashboards;
mod db;
mod export;
mod figures;
mod follow;
mod fuzz;
mod hardening;
mod house;
mod logs;
mod outputs;
mod parquet_runner;
mod queries;
mod reader;
mod schema;
mod shards;
mod sim;
mod sources;
mod sql_shapes;
mod storage;
mod story;
mod terminal;
mod viz;
mod writers;
