//! Parquet files of the dataset, written and read back: rows of [`Value`]s typed by a
//! [`Table`]'s columns, written with zstd, statistics per page and row groups sized for scans.
//!
//! This uses the `parquet` crate's own column writers, not Arrow: the dataset's columns are flat
//! and of three types, so Arrow's arrays would only be a copy on the way, and leaving Arrow out
//! keeps seven crates and about 100 s of CPU out of a fresh build (issue 29). Parquet wants each
//! column chunk of a row group in one piece while rows arrive with every column at once, so each
//! column is encoded into its own buffer of finished (compressed) pages, and at the end of a row
//! group the buffers are spliced into the file one after another. Memory holds the row group's
//! compressed pages and one batch of plain values.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use parquet::basic::{Compression, ConvertedType, LogicalType, Repetition, ZstdLevel};
use parquet::column::page::{CompressedPage, PageWriteSpec, PageWriter};
use parquet::column::writer::{
    get_column_writer, ColumnCloseResult, ColumnWriter, ColumnWriterImpl,
};
use parquet::data_type::{ByteArray, DataType};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterPropertiesPtr};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::{SerializedFileWriter, SerializedPageWriter, TrackedWrite};
use parquet::record::Field;
use parquet::schema::types::{SchemaDescriptor, Type as SchemaType};

use super::tables::{Table, Type};
use crate::error::{Error, Result};

/// Rows per row group: large enough for scans, small enough that a reader skips most of a file
/// by the groups' statistics when it asks about one memory or a few snapshots.
pub const ROW_GROUP_ROWS: usize = 500_000;

/// Rows of plain values held before they are handed to the column encoders.
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

/// The Parquet schema of a table's files: every column optional (NULL anywhere), integers as
/// INT64, reals as DOUBLE, text as UTF-8 BYTE_ARRAY (which DuckDB and Spark read as strings).
pub fn schema(table: &Table) -> std::result::Result<SchemaType, ParquetError> {
    let mut fields = Vec::with_capacity(table.columns.len());
    for (name, kind) in table.columns {
        let field = match kind {
            Type::Int => SchemaType::primitive_type_builder(name, parquet::basic::Type::INT64),
            Type::Real => SchemaType::primitive_type_builder(name, parquet::basic::Type::DOUBLE),
            Type::Text => {
                SchemaType::primitive_type_builder(name, parquet::basic::Type::BYTE_ARRAY)
                    .with_logical_type(Some(LogicalType::String))
                    .with_converted_type(ConvertedType::UTF8)
            }
        };
        fields.push(Arc::new(
            field.with_repetition(Repetition::OPTIONAL).build()?,
        ));
    }
    SchemaType::group_type_builder("schema")
        .with_fields(fields)
        .build()
}

fn properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_created_by(format!("memstate {}", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A column's finished pages, kept in memory until its row group is written.
type Pages = Arc<Mutex<TrackedWrite<Vec<u8>>>>;

/// The page writer of one buffered column: each page is serialized as the file writer would
/// (header, then the compressed bytes) into the column's buffer, at offsets counted from the
/// buffer's start, which `append_column` expects.
struct BufferedPages(Pages);

impl PageWriter for BufferedPages {
    fn write_page(&mut self, page: CompressedPage) -> parquet::errors::Result<PageWriteSpec> {
        let mut sink = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        SerializedPageWriter::new(&mut sink).write_page(page)
    }

    fn close(&mut self) -> parquet::errors::Result<()> {
        Ok(())
    }
}

/// One column's values of the batch under way that are not NULL.
enum Batch {
    Int(Vec<i64>),
    Real(Vec<f64>),
    Text(Vec<ByteArray>),
}

/// One column of the row group under way: its encoder, the pages it has finished, and the batch
/// under way with its definition levels (1 a value, 0 NULL).
struct Column {
    encoder: ColumnWriter<'static>,
    pages: Pages,
    batch: Batch,
    levels: Vec<i16>,
}

/// Hand a batch's values and levels to a column's encoder, and empty them.
fn encode<T: DataType>(
    encoder: &mut ColumnWriterImpl<'_, T>,
    values: &mut Vec<T::T>,
    levels: &mut Vec<i16>,
) -> parquet::errors::Result<()> {
    encoder.write_batch(values, Some(levels), None)?;
    values.clear();
    levels.clear();
    Ok(())
}

/// Writes one table's file from rows given one at a time.
pub struct Writer<'a> {
    table: &'a Table,
    file: SerializedFileWriter<&'a mut File>,
    descriptor: Arc<SchemaDescriptor>,
    properties: WriterPropertiesPtr,
    columns: Vec<Column>,
    group_rows: usize,
    /// Rows in the batch under way, and in the row group under way.
    batched: usize,
    grouped: usize,
    rows: u64,
}

fn io_error(error: ParquetError) -> std::io::Error {
    std::io::Error::other(error)
}

impl<'a> Writer<'a> {
    pub fn new(table: &'a Table, file: &'a mut File) -> std::io::Result<Writer<'a>> {
        Writer::with_row_groups_of(table, file, ROW_GROUP_ROWS)
    }

    /// A writer whose row groups hold `group_rows` rows (the last one fewer).
    fn with_row_groups_of(
        table: &'a Table,
        file: &'a mut File,
        group_rows: usize,
    ) -> std::io::Result<Writer<'a>> {
        let schema = Arc::new(schema(table).map_err(io_error)?);
        let properties = Arc::new(properties());
        let file = SerializedFileWriter::new(file, schema.clone(), properties.clone())
            .map_err(io_error)?;
        let descriptor = Arc::new(SchemaDescriptor::new(schema));
        let mut writer = Writer {
            table,
            file,
            descriptor,
            properties,
            columns: Vec::new(),
            group_rows: group_rows.max(1),
            batched: 0,
            grouped: 0,
            rows: 0,
        };
        writer.columns = writer.new_columns();
        Ok(writer)
    }

    fn new_columns(&self) -> Vec<Column> {
        self.table
            .columns
            .iter()
            .enumerate()
            .map(|(index, (_, kind))| {
                let pages: Pages = Arc::new(Mutex::new(TrackedWrite::new(Vec::new())));
                let encoder = get_column_writer(
                    self.descriptor.column(index),
                    self.properties.clone(),
                    Box::new(BufferedPages(pages.clone())),
                );
                let batch = match kind {
                    Type::Int => Batch::Int(Vec::new()),
                    Type::Real => Batch::Real(Vec::new()),
                    Type::Text => Batch::Text(Vec::new()),
                };
                Column {
                    encoder,
                    pages,
                    batch,
                    levels: Vec::new(),
                }
            })
            .collect()
    }

    /// Add a row; its values must match the table's column types (NULL anywhere).
    pub fn push(&mut self, row: &[Value]) -> std::io::Result<()> {
        for ((column, value), (name, _)) in self.columns.iter_mut().zip(row).zip(self.table.columns)
        {
            match (&mut column.batch, value) {
                (_, Value::Null) => {
                    column.levels.push(0);
                    continue;
                }
                (Batch::Int(values), Value::Int(number)) => values.push(*number),
                (Batch::Real(values), Value::Real(number)) => values.push(*number),
                (Batch::Real(values), Value::Int(number)) => values.push(*number as f64),
                (Batch::Text(values), Value::Text(text)) => {
                    values.push(ByteArray::from(text.as_str()))
                }
                (_, other) => {
                    return Err(std::io::Error::other(format!(
                        "{}.{name}: a value of the wrong type ({other:?})",
                        self.table.name
                    )))
                }
            }
            column.levels.push(1);
        }
        self.batched += 1;
        self.grouped += 1;
        self.rows += 1;
        if self.batched >= BATCH_ROWS {
            self.encode_batch()?;
        }
        if self.grouped >= self.group_rows {
            self.finish_row_group()?;
        }
        Ok(())
    }

    /// Hand the batch's values to the column encoders.
    fn encode_batch(&mut self) -> std::io::Result<()> {
        for column in &mut self.columns {
            let levels = &mut column.levels;
            let written = match (&mut column.encoder, &mut column.batch) {
                (ColumnWriter::Int64ColumnWriter(encoder), Batch::Int(values)) => {
                    encode(encoder, values, levels)
                }
                (ColumnWriter::DoubleColumnWriter(encoder), Batch::Real(values)) => {
                    encode(encoder, values, levels)
                }
                (ColumnWriter::ByteArrayColumnWriter(encoder), Batch::Text(values)) => {
                    encode(encoder, values, levels)
                }
                _ => Err(ParquetError::General(format!(
                    "{}: a column's encoder does not match its type",
                    self.table.name
                ))),
            };
            written.map_err(io_error)?;
        }
        self.batched = 0;
        Ok(())
    }

    /// Close the row group under way: each column's pages go into the file in column order.
    fn finish_row_group(&mut self) -> std::io::Result<()> {
        self.encode_batch()?;
        if self.grouped == 0 {
            return Ok(());
        }
        let fresh = self.new_columns();
        let columns = std::mem::replace(&mut self.columns, fresh);
        let mut group = self.file.next_row_group().map_err(io_error)?;
        for column in columns {
            let closed: ColumnCloseResult = column.encoder.close().map_err(io_error)?;
            let pages = Arc::try_unwrap(column.pages)
                .map_err(|_| std::io::Error::other("a column's pages are still being written"))?
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .into_inner()
                .map_err(io_error)?;
            group
                .append_column(&bytes::Bytes::from(pages), closed)
                .map_err(io_error)?;
        }
        group.close().map_err(io_error)?;
        self.grouped = 0;
        Ok(())
    }

    /// Write what is pending and the file's footer.
    pub fn finish(mut self) -> std::io::Result<u64> {
        self.finish_row_group()?;
        self.file.close().map_err(io_error)?;
        Ok(self.rows)
    }
}

/// The column names and rows of a Parquet file of the dataset (for merging run-level tables,
/// and for tests and tools that check a dataset). Columns of other types are refused.
pub fn read(path: &Path) -> Result<(Vec<String>, Vec<Vec<Value>>)> {
    let shown = path.display().to_string();
    let bad = |error: &dyn std::fmt::Display| {
        Error::database(&shown, format!("cannot read as Parquet: {error}"))
    };
    let file = File::open(path).map_err(|error| bad(&error))?;
    let reader = SerializedFileReader::new(file).map_err(|error| bad(&error))?;
    let names: Vec<String> = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|column| column.name().to_string())
        .collect();
    let mut rows = Vec::new();
    for row in reader.get_row_iter(None).map_err(|error| bad(&error))? {
        let row = row.map_err(|error| bad(&error))?;
        let mut cells = Vec::with_capacity(names.len());
        for (name, field) in row.get_column_iter() {
            cells.push(match field {
                Field::Null => Value::Null,
                Field::Long(number) => Value::Int(*number),
                Field::Double(number) => Value::Real(*number),
                Field::Str(text) => Value::Text(text.clone()),
                other => {
                    return Err(bad(&format!(
                        "column {name:?} has a type memstate does not write ({other})"
                    )))
                }
            });
        }
        rows.push(cells);
    }
    Ok((names, rows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tables::Level;

    const MIXED: Table = Table {
        name: "mixed",
        level: Level::Node,
        columns: &[("n", Type::Int), ("x", Type::Real), ("t", Type::Text)],
        sql: "",
    };

    #[test]
    fn rows_come_back_as_written_across_row_groups() {
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("part-0.parquet");
        // 2,500 rows: NULL in a different column every few rows, integers given for the real.
        let rows: Vec<Vec<Value>> = (0..2500i64)
            .map(|n| {
                vec![
                    if n % 7 == 3 {
                        Value::Null
                    } else {
                        Value::Int(n - 1000)
                    },
                    match n % 5 {
                        0 => Value::Null,
                        1 => Value::Int(n),
                        _ => Value::Real(n as f64 / 4.0),
                    },
                    if n % 11 == 0 {
                        Value::Null
                    } else {
                        Value::Text(format!("row {n} é"))
                    },
                ]
            })
            .collect();
        let mut file = File::create(&path).unwrap();
        let mut writer = Writer::with_row_groups_of(&MIXED, &mut file, 1000).unwrap();
        for row in &rows {
            writer.push(row).unwrap();
        }
        assert_eq!(writer.finish().unwrap(), 2500);
        drop(file);

        let reader = SerializedFileReader::new(File::open(&path).unwrap()).unwrap();
        let groups: Vec<i64> = reader
            .metadata()
            .row_groups()
            .iter()
            .map(|group| group.num_rows())
            .collect();
        assert_eq!(groups, [1000, 1000, 500]);

        let (names, back) = read(&path).unwrap();
        assert_eq!(names, ["n", "x", "t"]);
        let expected: Vec<Vec<Value>> = rows
            .into_iter()
            .map(|mut row| {
                if let Value::Int(n) = row[1] {
                    row[1] = Value::Real(n as f64);
                }
                row
            })
            .collect();
        assert_eq!(back, expected);
    }

    #[test]
    fn a_value_of_the_wrong_type_is_refused_by_column() {
        let folder = tempfile::tempdir().unwrap();
        let mut file = File::create(folder.path().join("x.parquet")).unwrap();
        let mut writer = Writer::new(&MIXED, &mut file).unwrap();
        let refused = writer
            .push(&[Value::Text("a".into()), Value::Null, Value::Null])
            .unwrap_err();
        assert!(refused.to_string().contains("mixed.n"), "{refused}");
    }
}
