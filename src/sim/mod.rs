//! The simulator: writes realistic runs of dumps from a Realm-like allocator under a Legate-like
//! workload, deterministically from a seed (same seed and options, byte-identical output).
//!
//! [`allocator`] is Realm's range allocator, [`machine`] the memories with allocation states,
//! deferred allocation and garbage collection, [`workload`] the client program. This module holds
//! the options and turns the machine's state into format v1 dumps.

pub mod allocator;
pub mod machine;
pub mod workload;

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::dump::write::{self, Text};
use crate::dump::{format_id, State};
use crate::error::{Error, Result};
use workload::{Node, Oom, Simulation};

/// How the dumps are laid out on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileLayout {
    /// One `.json` file per dump, in a folder per node.
    #[default]
    Files,
    /// One `.ndjson` stream per node, a dump per line.
    Stream,
}

/// Compression of the written files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    #[default]
    None,
    Gzip,
    Zstd,
}

/// Everything that shapes a simulated run.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub run_id: String,
    pub nodes: usize,
    pub gpus_per_node: usize,
    pub gpu_capacity: u64,
    pub system_capacity: u64,
    pub zcopy_capacity: u64,
    pub steps: u64,
    /// A periodic dump every this many steps (per node).
    pub dump_every: u64,
    /// Scales how much work each step does (stores, tasks, temporaries); 1.0 is the default.
    pub intensity: f64,
    /// Write strings once in a `strings` table and refer to them by index.
    pub intern: bool,
    pub layout: FileLayout,
    pub compression: Compression,
    /// Go on after an out-of-memory error (the mapper backs off) instead of ending the run.
    pub continue_after_oom: bool,
    /// The wall time the run starts at, in seconds since the Unix epoch: each dump's `wall_time`
    /// is this plus its `time_ns`. A fixed default keeps the output the same for the same seed.
    pub wall_start_unix: i64,
    /// Wait this long after writing each dump (and flush a stream's line), to play a running job
    /// for `import --follow`; zero writes as fast as possible.
    pub pace: std::time::Duration,
}

/// The default start of a simulated run: 2026-12-01T08:00:00Z.
pub const DEFAULT_WALL_START: i64 = 1_796_112_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 1,
            run_id: "sim-run".to_string(),
            nodes: 2,
            gpus_per_node: 2,
            gpu_capacity: 1 << 30,
            system_capacity: 4 << 30,
            zcopy_capacity: 64 << 20,
            steps: 400,
            dump_every: 10,
            intensity: 1.0,
            intern: true,
            layout: FileLayout::Files,
            compression: Compression::None,
            continue_after_oom: false,
            wall_start_unix: DEFAULT_WALL_START,
            pace: std::time::Duration::ZERO,
        }
    }
}

/// What a simulation wrote.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SimulationSummary {
    pub run_id: String,
    pub steps: u64,
    pub dumps: u64,
    pub oom_dumps: u64,
    pub files: Vec<PathBuf>,
    pub bytes: u64,
    pub allocations: u64,
    pub collections: u64,
    pub deferred_allocations: u64,
}

/// Something a long simulation reports as it goes.
#[derive(Debug, Clone, Copy)]
pub enum SimulationEvent {
    Started { steps: u64 },
    Step { step: u64 },
}

/// One open output: a file per dump, or a stream per node.
struct Output {
    folder: PathBuf,
    config: Config,
    streams: Vec<Option<BufWriter<Box<dyn Write>>>>,
    summary: SimulationSummary,
}

fn io_error(path: &Path, error: std::io::Error) -> Error {
    Error::write(path, error)
}

impl Output {
    fn extension(&self, base: &str) -> String {
        match self.config.compression {
            Compression::None => base.to_string(),
            Compression::Gzip => format!("{base}.gz"),
            Compression::Zstd => format!("{base}.zst"),
        }
    }

    fn open(&self, path: &Path) -> Result<Box<dyn Write>> {
        let file = File::create(path).map_err(|error| io_error(path, error))?;
        Ok(match self.config.compression {
            Compression::None => Box::new(file),
            Compression::Gzip => Box::new(flate2::write::GzEncoder::new(
                file,
                flate2::Compression::default(),
            )),
            Compression::Zstd => Box::new(
                zstd::stream::write::Encoder::new(file, 3)
                    .map_err(|error| io_error(path, error))?
                    .auto_finish(),
            ),
        })
    }

    fn write(&mut self, node: usize, seq: i64, text: &str) -> Result<()> {
        match self.config.layout {
            FileLayout::Files => {
                let folder = self.folder.join(format!("node{node}"));
                fs::create_dir_all(&folder).map_err(|error| io_error(&folder, error))?;
                let path = folder.join(self.extension(&format!(
                    "{}-node{node}-seq{seq:05}.json",
                    crate::files::safe_stem(&self.config.run_id)
                )));
                let mut writer = self.open(&path)?;
                writer
                    .write_all(text.as_bytes())
                    .and_then(|_| writer.write_all(b"\n"))
                    .and_then(|_| writer.flush())
                    .map_err(|error| io_error(&path, error))?;
                drop(writer);
                self.summary.files.push(path);
            }
            FileLayout::Stream => {
                let path = self.folder.join(self.extension(&format!(
                    "{}-node{node}.ndjson",
                    crate::files::safe_stem(&self.config.run_id)
                )));
                if self.streams[node].is_none() {
                    self.streams[node] = Some(BufWriter::new(self.open(&path)?));
                    self.summary.files.push(path.clone());
                }
                if let Some(stream) = self.streams[node].as_mut() {
                    stream
                        .write_all(text.as_bytes())
                        .and_then(|_| stream.write_all(b"\n"))
                        .map_err(|error| io_error(&path, error))?;
                    if !self.config.pace.is_zero() {
                        stream.flush().map_err(|error| io_error(&path, error))?;
                    }
                }
            }
        }
        if !self.config.pace.is_zero() {
            std::thread::sleep(self.config.pace);
        }
        Ok(())
    }

    fn finish(mut self) -> Result<SimulationSummary> {
        for stream in self.streams.iter_mut().flatten() {
            stream
                .flush()
                .map_err(|error| Error::write(&self.folder, error))?;
        }
        // Dropping the writers finishes the compressed streams.
        self.streams.clear();
        self.summary.bytes = self
            .summary
            .files
            .iter()
            .map(|path| fs::metadata(path).map(|meta| meta.len()).unwrap_or(0))
            .sum();
        Ok(self.summary)
    }
}

/// Interns strings for one dump when interning is on.
struct Strings {
    intern: bool,
    table: Vec<String>,
    index: std::collections::HashMap<String, usize>,
}

impl Strings {
    fn value(&mut self, text: &str) -> Text {
        if !self.intern {
            return Text::Str(text.to_string());
        }
        let next = self.table.len();
        let index = *self.index.entry(text.to_string()).or_insert(next);
        if index == next {
            self.table.push(text.to_string());
        }
        Text::Index(index)
    }
}

/// Format v1 for one node at this moment.
fn dump_node(
    simulation: &Simulation,
    node: &Node,
    seq: i64,
    reason: &str,
    note: Option<&str>,
) -> (String, u64) {
    let config = &simulation.config;
    let mut strings = Strings {
        intern: config.intern,
        table: Vec::new(),
        index: Default::default(),
    };
    let time_ns = simulation.now_ns(node.index as usize);
    let mut allocation_count = 0;
    let mut memories = Vec::new();
    let mut referenced_objects = std::collections::BTreeSet::new();
    for memory in &node.memories {
        let mut allocations = write::Allocations::default();
        let mut sorted: Vec<_> = memory.allocations.values().collect();
        sorted.sort_by_key(|allocation| (allocation.offset, allocation.uid));
        for allocation in sorted {
            let mut entry = write::Allocation::new(
                format_id(allocation.uid),
                strings.value(allocation.kind),
                allocation.state.as_str(),
                allocation.offset,
                allocation.size,
            );
            entry.handle = allocation.handle.map(|handle| format!("{handle:x}"));
            entry.alignment = Some(allocation.alignment);
            entry.created_ns = Some(allocation.created_ns);
            entry.provenance = Some(strings.value(&allocation.provenance));
            entry.label = allocation
                .label
                .as_deref()
                .map(|label| strings.value(label));
            entry.gc_priority = allocation.gc_priority;
            if let Some((field, size, object)) = &allocation.field {
                referenced_objects.insert(object.clone());
                entry.fields.push(write::Field {
                    id: *field,
                    size: *size,
                    object: Some(strings.value(object)),
                });
            }
            if allocation.collected && allocation.state == State::PendingFree {
                entry.attrs.insert("collected", true.into());
            }
            allocations.push(&entry);
        }
        allocation_count += allocations.len() as u64;
        let mut entry = write::Memory::new(
            format!("{:x}", memory.id),
            strings.value(memory.kind),
            memory.capacity,
        );
        entry.name = Some(strings.value(&memory.name));
        entry.alignment = Some(memory.alignment);
        entry.allocations = allocations;
        entry.holes = Some(
            memory
                .allocator
                .free_ranges()
                .map(|range| write::Range {
                    offset: range.offset,
                    size: range.size,
                })
                .collect(),
        );
        for request in &memory.failed {
            entry.failed_requests.push(write::FailedRequest {
                size: request.size,
                alignment: Some(request.alignment),
                kind: Some(strings.value(request.kind)),
                provenance: Some(strings.value(&request.provenance)),
                time_ns: Some(request.time_ns),
                note: Some(strings.value(&request.note)),
                device_free: None,
            });
        }
        memories.push(entry);
    }
    let objects: Vec<write::Object> = simulation
        .stores
        .iter()
        .filter(|store| referenced_objects.contains(&store.id))
        .map(|store| write::Object {
            id: strings.value(&store.id),
            kind: Some(strings.value("store")),
            name: Some(strings.value(&store.name)),
            shape: Some(store.shape.clone()),
            dtype: Some(strings.value(store.dtype)),
            partition: Some(strings.value(&store.partition)),
            provenance: Some(strings.value(&store.provenance)),
        })
        .collect();
    // Paced, the run plays a live job: each dump's wall time is when it is written. Otherwise the
    // start plus the dump's run time, so the same seed gives the same files.
    let wall_time = match std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()
        .filter(|_| !config.pace.is_zero())
    {
        Some(now) => crate::units::rfc3339_utc(
            i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            now.subsec_nanos(),
        ),
        None => crate::units::rfc3339_utc(
            config
                .wall_start_unix
                .saturating_add(time_ns.div_euclid(1_000_000_000)),
            time_ns.rem_euclid(1_000_000_000) as u32,
        ),
    };
    let snapshot = write::Snapshot {
        seq,
        time_ns,
        wall_time: Some(wall_time),
        reason: reason.to_string(),
        note: note.map(|note| strings.value(note)),
    };
    let run = write::Run {
        id: config.run_id.clone(),
        node: node.index as i64,
        node_count: Some(config.nodes as u64),
        host: Some(format!("node{:03}", node.index + 1)),
        pid: Some(4000 + node.index),
    };
    let mut dump = write::Dump::new(run, snapshot, memories);
    dump.producer = Some(write::Producer {
        name: "memstate-sim".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    });
    dump.objects = objects;
    dump.strings = strings.table;
    (
        String::from_utf8(dump.into_json()).unwrap_or_default(),
        allocation_count,
    )
}

fn check(config: &Config) -> Result<()> {
    let problems = [
        (config.nodes == 0, "--nodes must be at least 1"),
        (config.gpus_per_node == 0, "--gpus must be at least 1"),
        (config.nodes > 1024, "--nodes must be at most 1024"),
        (config.gpus_per_node > 64, "--gpus must be at most 64"),
        (config.dump_every == 0, "--dump-every must be at least 1"),
        (
            config.gpu_capacity < (1 << 20),
            "--gpu-capacity must be at least 1MiB",
        ),
        (
            config.system_capacity < (1 << 20),
            "--system-capacity must be at least 1MiB",
        ),
        (
            config.zcopy_capacity < (1 << 20),
            "--zcopy-capacity must be at least 1MiB",
        ),
        (
            !(config.intensity > 0.0 && config.intensity <= 10.0),
            "--intensity must be above 0 and at most 10",
        ),
        (config.run_id.is_empty(), "--run must not be empty"),
    ];
    match problems.iter().find(|(bad, _)| *bad) {
        Some((_, message)) => Err(Error::Usage(message.to_string())),
        None => Ok(()),
    }
}

/// Simulate a run and write its dumps under `folder`.
pub fn simulate(
    config: &Config,
    folder: &Path,
    report: &mut dyn FnMut(SimulationEvent),
) -> Result<SimulationSummary> {
    check(config)?;
    fs::create_dir_all(folder).map_err(|error| io_error(folder, error))?;
    let mut simulation = Simulation::new(config.clone());
    let mut output = Output {
        folder: folder.to_path_buf(),
        config: config.clone(),
        streams: (0..config.nodes).map(|_| None).collect(),
        summary: SimulationSummary {
            run_id: config.run_id.clone(),
            ..Default::default()
        },
    };
    report(SimulationEvent::Started {
        steps: config.steps,
    });
    let write_dump = |simulation: &mut Simulation,
                      output: &mut Output,
                      node: usize,
                      reason: &str,
                      note: Option<&str>|
     -> Result<()> {
        let seq = simulation.nodes[node].next_seq;
        simulation.nodes[node].next_seq += 1;
        let (text, allocations) = dump_node(simulation, &simulation.nodes[node], seq, reason, note);
        output.write(node, seq, &text)?;
        output.summary.dumps += 1;
        output.summary.allocations += allocations;
        if reason == "oom" {
            output.summary.oom_dumps += 1;
        }
        Ok(())
    };
    let mut ended_by_oom = false;
    while simulation.step < config.steps {
        match simulation.advance() {
            Ok(()) => {}
            Err(Oom { node, memory }) => {
                write_dump(
                    &mut simulation,
                    &mut output,
                    node,
                    "oom",
                    Some("default mapper: out of memory"),
                )?;
                // The failed request is reported once; the mapper backs off from that task.
                simulation.nodes[node].memories[memory].failed.clear();
                if !config.continue_after_oom {
                    ended_by_oom = true;
                    simulation.step += 1;
                    break;
                }
                simulation.step += 1;
            }
        }
        if simulation.step.is_multiple_of(config.dump_every) {
            for node in 0..config.nodes {
                write_dump(&mut simulation, &mut output, node, "periodic", None)?;
            }
        }
        report(SimulationEvent::Step {
            step: simulation.step,
        });
    }
    if !ended_by_oom {
        for node in 0..config.nodes {
            write_dump(
                &mut simulation,
                &mut output,
                node,
                "exit",
                Some("end of program"),
            )?;
        }
    }
    output.summary.steps = simulation.step;
    output.summary.collections = simulation.collections;
    output.summary.deferred_allocations = simulation.deferred;
    output.finish()
}
