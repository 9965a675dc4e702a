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

use serde_json::{json, Map, Value};

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
    fn value(&mut self, text: &str) -> Value {
        if !self.intern {
            return Value::String(text.to_string());
        }
        let next = self.table.len();
        let index = *self.index.entry(text.to_string()).or_insert(next);
        if index == next {
            self.table.push(text.to_string());
        }
        json!(index)
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
        let mut allocations = Vec::with_capacity(memory.allocations.len());
        let mut sorted: Vec<_> = memory.allocations.values().collect();
        sorted.sort_by_key(|allocation| (allocation.offset, allocation.uid));
        for allocation in sorted {
            let mut entry = Map::new();
            entry.insert("uid".into(), json!(format_id(allocation.uid)));
            if let Some(handle) = allocation.handle {
                entry.insert("handle".into(), json!(format!("{handle:x}")));
            }
            entry.insert("kind".into(), strings.value(allocation.kind));
            entry.insert("state".into(), json!(allocation.state.as_str()));
            entry.insert("offset".into(), json!(allocation.offset));
            entry.insert("size".into(), json!(allocation.size));
            entry.insert("alignment".into(), json!(allocation.alignment));
            entry.insert("created_ns".into(), json!(allocation.created_ns));
            entry.insert("provenance".into(), strings.value(&allocation.provenance));
            if let Some(label) = &allocation.label {
                entry.insert("label".into(), strings.value(label));
            }
            if let Some(priority) = allocation.gc_priority {
                entry.insert("gc_priority".into(), json!(priority));
            }
            if let Some((field, size, object)) = &allocation.field {
                referenced_objects.insert(object.clone());
                entry.insert(
                    "fields".into(),
                    json!([{"id": field, "size": size, "object": strings.value(object)}]),
                );
            }
            if allocation.collected && allocation.state == State::PendingFree {
                entry.insert("attrs".into(), json!({"collected": true}));
            }
            allocations.push(Value::Object(entry));
        }
        allocation_count += allocations.len() as u64;
        let holes: Vec<Value> = memory
            .allocator
            .free_ranges()
            .map(|range| json!({"offset": range.offset, "size": range.size}))
            .collect();
        let mut entry = Map::new();
        entry.insert("id".into(), json!(format!("{:x}", memory.id)));
        entry.insert("kind".into(), strings.value(memory.kind));
        entry.insert("name".into(), strings.value(&memory.name));
        entry.insert("capacity".into(), json!(memory.capacity));
        entry.insert("alignment".into(), json!(memory.alignment));
        entry.insert("allocations".into(), Value::Array(allocations));
        entry.insert("holes".into(), Value::Array(holes));
        if !memory.failed.is_empty() {
            let failed: Vec<Value> = memory
                .failed
                .iter()
                .map(|request| {
                    json!({"size": request.size, "alignment": request.alignment, "kind": strings.value(request.kind),
                           "provenance": strings.value(&request.provenance), "time_ns": request.time_ns, "note": strings.value(&request.note)})
                })
                .collect();
            entry.insert("failed_requests".into(), Value::Array(failed));
        }
        memories.push(Value::Object(entry));
    }
    let objects: Vec<Value> = simulation
        .stores
        .iter()
        .filter(|store| referenced_objects.contains(&store.id))
        .map(|store| {
            json!({"id": strings.value(&store.id), "kind": strings.value("store"), "name": strings.value(&store.name),
                   "shape": store.shape, "dtype": strings.value(store.dtype), "partition": strings.value(&store.partition),
                   "provenance": strings.value(&store.provenance)})
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
    let mut snapshot =
        json!({"seq": seq, "time_ns": time_ns, "wall_time": wall_time, "reason": reason});
    if let Some(note) = note {
        snapshot["note"] = strings.value(note);
    }
    let mut top = Map::new();
    top.insert("format".into(), json!("memstate-dump"));
    top.insert("version".into(), json!(1));
    top.insert(
        "producer".into(),
        json!({"name": "memstate-sim", "version": env!("CARGO_PKG_VERSION")}),
    );
    top.insert(
        "run".into(),
        json!({"id": config.run_id, "node": node.index, "node_count": config.nodes, "host": format!("node{:03}", node.index + 1), "pid": 4000 + node.index}),
    );
    top.insert("snapshot".into(), snapshot);
    top.insert("objects".into(), Value::Array(objects));
    top.insert("memories".into(), Value::Array(memories));
    if config.intern {
        top.insert("strings".into(), json!(strings.table));
    }
    (Value::Object(top).to_string(), allocation_count)
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
