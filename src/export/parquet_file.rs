//! Parquet files of the dataset, written and read back: rows of [`Value`]s typed by a
//! [`Table`]'s columns, turned into Arrow batches and written with zstd, statistics per page and
//! row groups sized for scans.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{Array, ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::tables::{Table, Type};
use crate::error::{Error, Result};

/// Rows per row group: large enough for scans, small enough that a reader skips most of a file
/// by the groups' statistics when it asks about one memory or a few snapshots.
pub const ROW_GROUP_ROWS: usize = 500_000;

/// Rows per Arrow batch handed to the writer.
const BATCH_ROWS: usize = 65_536;

/// One cell.
/// (Ordered as SQLite orders values where export needs an order: `export::sqlite_order`.)
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
}

/// The Arrow schema of a table's files.
pub fn schema(table: &Table) -> SchemaRef {
    let fields: Vec<Field> = table
        .columns
        .iter()
        .map(|(name, kind)| {
            let data_type = match kind {
                Type::Int => DataType::Int64,
                Type::Real => DataType::Float64,
                Type::Text => DataType::Utf8,
            };
            Field::new(*name, data_type, true)
        })
        .collect();
    Arc::new(Schema::new(fields))
}

fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(format!("memstate {}", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Column builders for one batch.
enum Builder {
    Int(Int64Builder),
    Real(Float64Builder),
    Text(StringBuilder),
}

/// Writes one table's file from rows given one at a time.
pub struct Writer<'a> {
    table: &'a Table,
    schema: SchemaRef,
    builders: Vec<Builder>,
    pending: usize,
    writer: ArrowWriter<&'a mut File>,
    rows: u64,
}

impl<'a> Writer<'a> {
    pub fn new(table: &'a Table, file: &'a mut File) -> std::io::Result<Writer<'a>> {
        let schema = schema(table);
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(properties()))
            .map_err(std::io::Error::other)?;
        Ok(Writer {
            table,
            schema,
            builders: new_builders(table),
            pending: 0,
            writer,
            rows: 0,
        })
    }

    /// Add a row; its values must match the table's column types (NULL anywhere).
    pub fn push(&mut self, row: &[Value]) -> std::io::Result<()> {
        for ((builder, value), (name, _)) in
            self.builders.iter_mut().zip(row).zip(self.table.columns)
        {
            match (builder, value) {
                (Builder::Int(b), Value::Null) => b.append_null(),
                (Builder::Real(b), Value::Null) => b.append_null(),
                (Builder::Text(b), Value::Null) => b.append_null(),
                (Builder::Int(b), Value::Int(number)) => b.append_value(*number),
                (Builder::Real(b), Value::Real(number)) => b.append_value(*number),
                (Builder::Real(b), Value::Int(number)) => b.append_value(*number as f64),
                (Builder::Text(b), Value::Text(text)) => b.append_value(text),
                (_, other) => {
                    return Err(std::io::Error::other(format!(
                        "{}.{name}: a value of the wrong type ({other:?})",
                        self.table.name
                    )))
                }
            }
        }
        self.pending += 1;
        self.rows += 1;
        if self.pending >= BATCH_ROWS {
            self.flush_batch()?;
        }
        Ok(())
    }

    fn flush_batch(&mut self) -> std::io::Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let arrays: Vec<ArrayRef> = self
            .builders
            .iter_mut()
            .map(|builder| match builder {
                Builder::Int(b) => Arc::new(b.finish()) as ArrayRef,
                Builder::Real(b) => Arc::new(b.finish()) as ArrayRef,
                Builder::Text(b) => Arc::new(b.finish()) as ArrayRef,
            })
            .collect();
        let batch =
            RecordBatch::try_new(self.schema.clone(), arrays).map_err(std::io::Error::other)?;
        self.writer.write(&batch).map_err(std::io::Error::other)?;
        self.pending = 0;
        Ok(())
    }

    /// Write what is pending and the file's footer.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.flush_batch()?;
        self.writer.close().map_err(std::io::Error::other)?;
        Ok(self.rows)
    }
}

fn new_builders(table: &Table) -> Vec<Builder> {
    table
        .columns
        .iter()
        .map(|(_, kind)| match kind {
            Type::Int => Builder::Int(Int64Builder::new()),
            Type::Real => Builder::Real(Float64Builder::new()),
            Type::Text => Builder::Text(StringBuilder::new()),
        })
        .collect()
}

/// The column names and rows of a Parquet file of the dataset (for merging run-level tables,
/// and for tests and tools that check a dataset). Columns of other types are refused.
pub fn read(path: &Path) -> Result<(Vec<String>, Vec<Vec<Value>>)> {
    let shown = path.display().to_string();
    let bad = |error: &dyn std::fmt::Display| {
        Error::database(&shown, format!("cannot read as Parquet: {error}"))
    };
    let file = File::open(path).map_err(|error| bad(&error))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|error| bad(&error))?;
    let names: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|field| field.name().clone())
        .collect();
    let reader = builder.build().map_err(|error| bad(&error))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|error| bad(&error))?;
        let first = rows.len();
        rows.extend((0..batch.num_rows()).map(|_| Vec::with_capacity(names.len())));
        for (index, column) in batch.columns().iter().enumerate() {
            let any = column.as_any();
            for (row, cells) in rows[first..].iter_mut().enumerate() {
                let value = if column.is_null(row) {
                    Value::Null
                } else if let Some(array) = any.downcast_ref::<Int64Array>() {
                    Value::Int(array.value(row))
                } else if let Some(array) = any.downcast_ref::<Float64Array>() {
                    Value::Real(array.value(row))
                } else if let Some(array) = any.downcast_ref::<StringArray>() {
                    Value::Text(array.value(row).to_string())
                } else {
                    return Err(bad(&format!(
                        "column {:?} has a type memstate does not write ({})",
                        names[index],
                        column.data_type()
                    )));
                };
                cells.push(value);
            }
        }
    }
    Ok((names, rows))
}
