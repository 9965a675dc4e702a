//! A Legate-like workload driving the simulated machine, step by step.
//!
//! Client objects (stores) of varied shapes and dtypes are partitioned into equal tiles across
//! every GPU of every node, so each store gives many same-sized instances. Tasks make the tiles they
//! touch `valid` while they run and leave them `collectable` after; they use short-lived deferred
//! buffers, tiny futures (some kept alive by the program for long) and sometimes a bounded pool that
//! needs one contiguous block. Discarded stores stay in a small cache, still collectable. Large
//! temporaries now and then ask for big contiguous blocks: the request that eventually fails.

use super::machine::{Memory, Placement, Request};
use super::Config;
use crate::dump::State;

/// SplitMix64: small, fast, and the same sequence on every platform for a seed.
#[derive(Debug, Clone)]
pub struct Random(u64);

impl Random {
    pub fn new(seed: u64) -> Random {
        Random(seed ^ 0x6d65_6d73_7461_7465)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..bound` (bound > 0).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound.max(1)
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub fn chance(&mut self, probability: f64) -> bool {
        self.unit() < probability
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

const DTYPES: [(&str, u64); 6] = [
    ("float64", 8),
    ("float32", 4),
    ("int64", 8),
    ("int32", 4),
    ("complex64", 8),
    ("uint8", 1),
];
const STORE_NAMES: [&str; 8] = ["x", "y", "grad", "weights", "a", "b", "tmp", "out"];
const SCRIPT_LINES: [u32; 12] = [12, 17, 23, 31, 42, 57, 64, 78, 91, 103, 118, 126];

/// A client-level object: a store partitioned into equal tiles, one per GPU of the machine.
#[derive(Debug, Clone)]
pub struct Store {
    pub id: String,
    pub name: String,
    pub shape: Vec<u64>,
    pub dtype: &'static str,
    pub partition: String,
    pub provenance: String,
    pub field_id: i64,
    pub element_size: u64,
    pub tile_bytes: u64,
    /// Per global GPU: the uid of its tile's instance, when one exists.
    pub instances: Vec<Option<u64>>,
    pub discarded: bool,
}

/// A task running on one global GPU.
#[derive(Debug, Clone)]
struct Task {
    gpu: usize,
    end_step: u64,
    stores: Vec<usize>,
    buffers: Vec<u64>,
}

/// A node of the machine: memories 0 (SYSTEM_MEM), 1 (Z_COPY_MEM), then one GPU_FB_MEM per GPU.
#[derive(Debug, Clone)]
pub struct Node {
    pub index: u64,
    pub memories: Vec<Memory>,
    pub next_seq: i64,
    next_uid: u64,
}

impl Node {
    fn new(index: u64, config: &Config) -> Node {
        let mut memories = vec![
            Memory::new(
                index,
                0,
                "SYSTEM_MEM",
                format!("node {index} system memory"),
                config.system_capacity,
                256,
            ),
            Memory::new(
                index,
                1,
                "Z_COPY_MEM",
                format!("node {index} zero-copy memory"),
                config.zcopy_capacity,
                256,
            ),
        ];
        for gpu in 0..config.gpus_per_node {
            memories.push(Memory::new(
                index,
                2 + gpu as u64,
                "GPU_FB_MEM",
                format!("GPU {gpu} framebuffer"),
                config.gpu_capacity,
                512,
            ));
        }
        // Legion distributed ids: the owner node in the high bits, so uids never collide.
        Node {
            index,
            memories,
            next_seq: 0,
            next_uid: (index << 48) | 1,
        }
    }

    fn uid(&mut self) -> u64 {
        self.next_uid += 1;
        self.next_uid - 1
    }
}

/// A failed request that ends the run (or is backed off from).
#[derive(Debug, Clone, Copy)]
pub struct Oom {
    pub node: usize,
    pub memory: usize,
}

/// The whole simulated run.
pub struct Simulation {
    pub config: Config,
    pub nodes: Vec<Node>,
    pub stores: Vec<Store>,
    pub random: Random,
    pub step: u64,
    tasks: Vec<Task>,
    /// (node, memory, uid, expiry step) of futures and temporaries.
    timed: Vec<(usize, usize, u64, u64)>,
    discarded_cache: Vec<usize>,
    /// How many running tasks use each tile instance: (global GPU, uid) → count.
    in_use: std::collections::BTreeMap<(usize, u64), u32>,
    pub collections: u64,
    pub deferred: u64,
}

impl Simulation {
    pub fn new(config: Config) -> Simulation {
        let nodes: Vec<Node> = (0..config.nodes)
            .map(|index| Node::new(index as u64, &config))
            .collect();
        let mut simulation = Simulation {
            random: Random::new(config.seed),
            config,
            nodes,
            stores: Vec::new(),
            step: 0,
            tasks: Vec::new(),
            timed: Vec::new(),
            discarded_cache: Vec::new(),
            in_use: Default::default(),
            collections: 0,
            deferred: 0,
        };
        simulation.runtime_internals();
        simulation
    }

    pub fn gpu_count(&self) -> usize {
        self.config.nodes * self.config.gpus_per_node
    }

    fn gpu_location(&self, gpu: usize) -> (usize, usize) {
        (
            gpu / self.config.gpus_per_node,
            2 + gpu % self.config.gpus_per_node,
        )
    }

    pub fn now_ns(&self, node: usize) -> i64 {
        // One step is a millisecond; each node's clock is a little off from the others.
        (self.step * 1_000_000 + node as u64 * 1_700) as i64
    }

    /// Place a request; returns its uid and placement.
    fn place(&mut self, node: usize, memory: usize, request: &Request) -> (u64, Placement) {
        let uid = self.nodes[node].uid();
        let now = self.now_ns(node);
        let release_delay = 1 + self.random.below(2);
        let step = self.step;
        let target = &mut self.nodes[node].memories[memory];
        let collectable_before = target.allocations.values().filter(|a| a.collected).count();
        let placement = target.request(request, uid, step, now, release_delay);
        self.collections += (target.allocations.values().filter(|a| a.collected).count()
            - collectable_before) as u64;
        if placement == Placement::Deferred {
            self.deferred += 1;
        }
        (uid, placement)
    }

    /// Runtime-internal allocations made at start-up and kept for the whole run.
    fn runtime_internals(&mut self) {
        for node in 0..self.nodes.len() {
            let memory_count = self.nodes[node].memories.len();
            for memory in 0..memory_count {
                let capacity = self.nodes[node].memories[memory].capacity;
                let sizes = [capacity / 64, capacity / 256, 4096];
                for (index, size) in sizes.into_iter().enumerate() {
                    let request = Request {
                        size: size.max(256),
                        alignment: 256,
                        kind: "internal",
                        provenance: "legion_runtime".into(),
                        label: Some(
                            ["DMA staging", "profiling buffer", "event table"][index].into(),
                        ),
                        gc_priority: None,
                        field: None,
                        with_handle: false,
                    };
                    self.place(node, memory, &request);
                }
            }
        }
    }

    fn provenance(&mut self) -> String {
        format!("script.py:{}", self.random.pick(&SCRIPT_LINES))
    }

    fn new_store(&mut self) {
        let gpus = self.gpu_count() as u64;
        // Tiles of 0.2% to 6% of a GPU, growing as the run goes on.
        let growth = 1.0 + 2.0 * self.step as f64 / self.config.steps.max(1) as f64;
        let fraction = (0.002 + 0.04 * self.random.unit() * self.random.unit())
            * growth
            * self.config.intensity;
        let (dtype, element_size) = *self.random.pick(&DTYPES);
        let tile_elements =
            ((self.config.gpu_capacity as f64 * fraction) as u64 / element_size).max(16);
        let columns = [1u64, 8, 64, 150, 1000][self.random.below(5) as usize];
        let tile_rows = (tile_elements / columns).max(1);
        let shape = if columns == 1 {
            vec![tile_rows * gpus]
        } else {
            vec![tile_rows * gpus, columns]
        };
        let tile_bytes = tile_rows * columns * element_size;
        let partition = if columns == 1 {
            format!("Tiling(tile=({tile_rows},), colors=({gpus},))")
        } else {
            format!("Tiling(tile=({tile_rows},{columns}), colors=({gpus},1))")
        };
        let index = self.stores.len();
        let name = format!("{}{}", self.random.pick(&STORE_NAMES), index);
        let provenance = self.provenance();
        self.stores.push(Store {
            id: format!("store-{index}"),
            name,
            shape,
            dtype,
            partition,
            provenance,
            field_id: 100 + (index % 7) as i64,
            element_size,
            tile_bytes,
            instances: vec![None; gpus as usize],
            discarded: false,
        });
    }

    fn discard_store(&mut self) {
        let candidates: Vec<usize> = (0..self.stores.len())
            .filter(|&index| {
                !self.stores[index].discarded
                    && !self.tasks.iter().any(|task| task.stores.contains(&index))
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        let index = *self.random.pick(&candidates);
        self.stores[index].discarded = true;
        self.discarded_cache.push(index);
        // The cache keeps a few discarded stores collectable; the oldest beyond that are deleted.
        while self.discarded_cache.len() > 4 {
            let oldest = self.discarded_cache.remove(0);
            for gpu in 0..self.gpu_count() {
                if let Some(uid) = self.stores[oldest].instances[gpu].take() {
                    let (node, memory) = self.gpu_location(gpu);
                    let free_at = self.step + 1 + self.random.below(2);
                    self.nodes[node].memories[memory].release(uid, free_at);
                }
            }
        }
    }

    /// Make a store's tile instance on `gpu` valid for a task, allocating it when needed.
    fn acquire_tile(&mut self, store: usize, gpu: usize) -> Result<(), Oom> {
        let (node, memory) = self.gpu_location(gpu);
        if let Some(uid) = self.stores[store].instances[gpu] {
            let step = self.step;
            let allocation = self.nodes[node].memories[memory].allocations.get_mut(&uid);
            match allocation {
                Some(allocation) if allocation.state != State::PendingFree => {
                    if allocation.state == State::Collectable {
                        allocation.state = State::Valid;
                    }
                    allocation.last_used = step;
                    *self.in_use.entry((gpu, uid)).or_insert(0) += 1;
                    return Ok(());
                }
                // Collected (or being freed): the task needs a new instance.
                _ => self.stores[store].instances[gpu] = None,
            }
        }
        let owner = &self.stores[store];
        let request = Request {
            size: owner.tile_bytes,
            alignment: 512,
            kind: "instance",
            provenance: owner.provenance.clone(),
            label: Some(format!("{}[tile {gpu}]", owner.name)),
            gc_priority: Some([0, 0, 0, 1, -1][self.random.below(5) as usize]),
            field: Some((owner.field_id, owner.element_size, owner.id.clone())),
            with_handle: true,
        };
        match self.place(node, memory, &request) {
            (_, Placement::Failed) => {
                self.fail(
                    node,
                    memory,
                    &request,
                    "default mapper: map_task could not allocate an instance",
                );
                Err(Oom { node, memory })
            }
            (uid, _) => {
                self.stores[store].instances[gpu] = Some(uid);
                *self.in_use.entry((gpu, uid)).or_insert(0) += 1;
                Ok(())
            }
        }
    }

    fn fail(&mut self, node: usize, memory: usize, request: &Request, note: &str) {
        let time_ns = self.now_ns(node);
        self.nodes[node].memories[memory]
            .failed
            .push(super::machine::FailedRequest {
                size: request.size,
                alignment: request.alignment,
                kind: request.kind,
                provenance: request.provenance.clone(),
                time_ns,
                note: note.to_string(),
            });
    }

    /// A short-lived allocation owned by a task or timed out by the program.
    fn transient(
        &mut self,
        node: usize,
        memory: usize,
        request: Request,
        note: &str,
    ) -> Result<(u64, Placement), Oom> {
        match self.place(node, memory, &request) {
            (_, Placement::Failed) => {
                self.fail(node, memory, &request, note);
                Err(Oom { node, memory })
            }
            placed => Ok(placed),
        }
    }

    fn launch_task(&mut self) -> Result<(), Oom> {
        let live: Vec<usize> = (0..self.stores.len())
            .filter(|&index| !self.stores[index].discarded)
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let gpu = self.random.below(self.gpu_count() as u64) as usize;
        let (node, memory) = self.gpu_location(gpu);
        let mut stores = Vec::new();
        for _ in 0..1 + self.random.below(3) {
            let store = *self.random.pick(&live);
            if !stores.contains(&store) {
                stores.push(store);
            }
        }
        let end_step = self.step + 1 + self.random.below(3);
        let mut task = Task {
            gpu,
            end_step,
            stores: Vec::new(),
            buffers: Vec::new(),
        };
        for &store in &stores {
            let acquired = self.acquire_tile(store, gpu);
            if acquired.is_ok() {
                task.stores.push(store);
            }
            if let Err(oom) = acquired {
                self.tasks.push(task);
                return Err(oom);
            }
        }
        let provenance = self.provenance();
        // Scratch space of the task body.
        let tile = stores
            .iter()
            .map(|&store| self.stores[store].tile_bytes)
            .max()
            .unwrap_or(4096);
        let scratch = Request {
            size: (tile / (2 + self.random.below(6))).max(256),
            alignment: 256,
            kind: "deferred_buffer",
            provenance: provenance.clone(),
            label: Some("task scratch".into()),
            gc_priority: None,
            field: None,
            with_handle: true,
        };
        match self.transient(node, memory, scratch, "deferred buffer of a running task") {
            Ok((uid, _)) => task.buffers.push(uid),
            Err(oom) => {
                self.tasks.push(task);
                return Err(oom);
            }
        }
        if self.random.chance(0.15) {
            let pool = Request {
                size: (self.config.gpu_capacity / 64) * (1 + self.random.below(4)),
                alignment: 4096,
                kind: "pool",
                provenance: provenance.clone(),
                label: Some("task pool".into()),
                gc_priority: None,
                field: None,
                with_handle: true,
            };
            match self.transient(
                node,
                memory,
                pool,
                "bounded task pool needs one contiguous block",
            ) {
                Ok((uid, _)) => task.buffers.push(uid),
                Err(oom) => {
                    self.tasks.push(task);
                    return Err(oom);
                }
            }
        }
        self.tasks.push(task);
        // The task's result: a tiny future, some kept alive by the program for a long time.
        let lifetime = if self.random.chance(0.3) {
            50 + self.random.below(400)
        } else {
            1 + self.random.below(5)
        };
        let in_zero_copy = self.random.chance(0.3);
        let future = Request {
            size: [8, 16, 64, 256][self.random.below(4) as usize],
            alignment: 16,
            kind: if in_zero_copy {
                "deferred_value"
            } else {
                "future"
            },
            provenance,
            label: Some(format!("future of task at step {}", self.step)),
            gc_priority: None,
            field: None,
            with_handle: false,
        };
        let future_memory = if in_zero_copy { 1 } else { memory };
        let (uid, _) = self.transient(node, future_memory, future, "future of a task")?;
        self.timed
            .push((node, future_memory, uid, self.step + lifetime));
        Ok(())
    }

    fn large_temporary(&mut self) -> Result<(), Oom> {
        let gpu = self.random.below(self.gpu_count() as u64) as usize;
        let (node, memory) = self.gpu_location(gpu);
        let progress = self.step as f64 / self.config.steps.max(1) as f64;
        let fraction = 0.05 + (0.1 + 0.45 * progress) * self.random.unit();
        let request = Request {
            size: ((self.config.gpu_capacity as f64 * fraction) as u64).max(4096) / 512 * 512,
            alignment: 512,
            kind: "deferred_buffer",
            provenance: self.provenance(),
            label: Some("large temporary".into()),
            gc_priority: None,
            field: None,
            with_handle: true,
        };
        let (uid, _) = self.transient(
            node,
            memory,
            request,
            "large temporary (e.g. a sort or a reduction buffer)",
        )?;
        let expiry = self.step + 1 + self.random.below(3);
        self.timed.push((node, memory, uid, expiry));
        Ok(())
    }

    /// Finish what ends at this step: releases, tasks, timed allocations.
    fn retire(&mut self) {
        let step = self.step;
        for node in &mut self.nodes {
            for memory in &mut node.memories {
                memory.complete_releases(step);
            }
        }
        let (ending, running): (Vec<Task>, Vec<Task>) = std::mem::take(&mut self.tasks)
            .into_iter()
            .partition(|task| task.end_step <= step);
        self.tasks = running;
        for task in ending {
            let (node, memory) = self.gpu_location(task.gpu);
            for uid in task.buffers {
                let free_at = step + self.random.below(2);
                self.nodes[node].memories[memory].release(uid, free_at);
            }
            for store in task.stores {
                let Some(uid) = self.stores[store].instances[task.gpu] else {
                    continue;
                };
                let count = self.in_use.entry((task.gpu, uid)).or_insert(1);
                *count = count.saturating_sub(1);
                if *count == 0 {
                    self.in_use.remove(&(task.gpu, uid));
                    if let Some(allocation) =
                        self.nodes[node].memories[memory].allocations.get_mut(&uid)
                    {
                        if allocation.state == State::Valid {
                            allocation.state = State::Collectable;
                        }
                    }
                }
            }
        }
        let (expired, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.timed)
            .into_iter()
            .partition(|timed| timed.3 <= step);
        self.timed = kept;
        for (node, memory, uid, _) in expired {
            let free_at = step + self.random.below(2);
            self.nodes[node].memories[memory].release(uid, free_at);
        }
    }

    /// Run one step of the workload; an `Err` is a request that could not be placed at all.
    pub fn advance(&mut self) -> Result<(), Oom> {
        self.retire();
        let intensity = self.config.intensity;
        if self.stores.is_empty() || self.random.chance(0.25 * intensity) {
            self.new_store();
        }
        if self.random.chance(0.08) {
            self.discard_store();
        }
        let tasks = 1 + self
            .random
            .below((2.0 * intensity).ceil().max(1.0) as u64 + self.gpu_count() as u64 / 2);
        for _ in 0..tasks {
            self.launch_task()?;
        }
        if self.random.chance(0.04 * intensity) {
            self.large_temporary()?;
        }
        self.step += 1;
        Ok(())
    }
}
