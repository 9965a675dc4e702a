//! Two runs side by side (`memstate compare`): their memories matched by node, kind and place
//! among the node's memories of that kind, the figures of each and their differences, the
//! provenances whose peak bytes changed most, and a verdict a person reads first.

use std::collections::BTreeMap;

/// One memory of a run over all its snapshots.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryFigures {
    pub node: i64,
    pub kind: String,
    /// Its place among the node's memories of its kind, by handle (0 first).
    pub ordinal: i64,
    pub handle: String,
    pub memory_id: i64,
    /// The most bytes allocated at any snapshot (None when never known).
    pub peak_used: Option<u64>,
    /// The smallest largest hole at any snapshot (None when never known).
    pub lowest_largest_hole: Option<u64>,
    /// The highest fragmentation at any snapshot (None when never known).
    pub peak_fragmentation: Option<f64>,
    /// How many requests failed on it.
    pub failed_requests: u64,
}

/// A run as compared: its memories, and each provenance's peak bytes held.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunFigures {
    pub run: String,
    pub memories: Vec<MemoryFigures>,
    /// (provenance, the most bytes it held at any one snapshot): allocations without one are
    /// counted under `None`.
    pub provenances: Vec<(Option<String>, u64)>,
}

/// A memory of A and its match in B (either may be missing).
#[derive(Debug, Clone, PartialEq)]
pub struct MatchedMemory<'r> {
    pub node: i64,
    pub kind: String,
    pub ordinal: i64,
    pub a: Option<&'r MemoryFigures>,
    pub b: Option<&'r MemoryFigures>,
}

/// One of the two runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl<'r> MatchedMemory<'r> {
    /// The memory on one side, when that run has it.
    pub fn on(&self, side: Side) -> Option<&'r MemoryFigures> {
        match side {
            Side::A => self.a,
            Side::B => self.b,
        }
    }
}

/// A provenance's peak bytes in A and in B (0 where it does not appear).
#[derive(Debug, Clone, PartialEq)]
pub struct ProvenanceChange {
    pub provenance: Option<String>,
    pub a: u64,
    pub b: u64,
}

impl ProvenanceChange {
    pub fn difference(&self) -> i64 {
        i64::try_from(self.b).unwrap_or(i64::MAX) - i64::try_from(self.a).unwrap_or(i64::MAX)
    }
}

/// Two runs compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison<'r> {
    pub a: &'r RunFigures,
    pub b: &'r RunFigures,
    /// By node, kind and ordinal.
    pub memories: Vec<MatchedMemory<'r>>,
    /// Largest change (either way) first.
    pub provenances: Vec<ProvenanceChange>,
}

/// Match the memories of `a` and `b` and line up their provenances.
pub fn compare<'r>(a: &'r RunFigures, b: &'r RunFigures) -> Comparison<'r> {
    // By key, each side's memory: a map, not a search per key (a node of 40,000 memories).
    let mut matched: BTreeMap<(i64, &str, i64), [Option<&'r MemoryFigures>; 2]> = BTreeMap::new();
    for (side, run) in [a, b].into_iter().enumerate() {
        for memory in &run.memories {
            let key = (memory.node, memory.kind.as_str(), memory.ordinal);
            matched.entry(key).or_default()[side] = Some(memory);
        }
    }
    let memories = matched
        .into_iter()
        .map(|((node, kind, ordinal), [in_a, in_b])| MatchedMemory {
            node,
            kind: kind.to_string(),
            ordinal,
            a: in_a,
            b: in_b,
        })
        .collect();
    let mut peaks: BTreeMap<&Option<String>, [u64; 2]> = BTreeMap::new();
    for (side, run) in [a, b].into_iter().enumerate() {
        for (name, bytes) in &run.provenances {
            peaks.entry(name).or_default()[side] = *bytes;
        }
    }
    let mut provenances: Vec<ProvenanceChange> = peaks
        .into_iter()
        .map(|(name, [in_a, in_b])| ProvenanceChange {
            provenance: name.clone(),
            a: in_a,
            b: in_b,
        })
        .collect();
    provenances.sort_by(|x, y| {
        y.difference()
            .unsigned_abs()
            .cmp(&x.difference().unsigned_abs())
            .then_with(|| x.provenance.cmp(&y.provenance))
    });
    Comparison {
        a,
        b,
        memories,
        provenances,
    }
}

impl Comparison<'_> {
    /// How the memories matched: how many on both sides, and how many on one only.
    pub fn matching(&self) -> (usize, usize, usize) {
        let both = self
            .memories
            .iter()
            .filter(|m| m.a.is_some() && m.b.is_some())
            .count();
        let only_a = self.memories.iter().filter(|m| m.b.is_none()).count();
        let only_b = self.memories.iter().filter(|m| m.a.is_none()).count();
        (both, only_a, only_b)
    }

    /// The sentence a person reads first: which run ran out of memory, where, and how the
    /// largest hole and the bytes used there differ.
    pub fn verdict(&self) -> String {
        let failed = |side: Side| {
            self.memories
                .iter()
                .filter(|m| m.on(side).is_some_and(|memory| memory.failed_requests > 0))
                .max_by_key(|m| m.on(side).map_or(0, |memory| memory.failed_requests))
        };
        let in_a = failed(Side::A);
        let in_b = failed(Side::B);
        let (a, b) = (&self.a.run, &self.b.run);
        match (in_a, in_b) {
            (Some(at), None) => format!(
                "{b} fixed the out-of-memory error of {a} ({}): {}",
                place(at, at.a),
                holes_and_use(at, "stays above", "fell to")
            ),
            (None, Some(at)) => format!(
                "{b} ran out of memory where {a} did not ({}): {}",
                place(at, at.b),
                holes_and_use(at, "fell to", "stayed above")
            ),
            (Some(at_a), Some(at_b)) => format!(
                "Both ran out of memory: {a} on {}, {b} on {}. There: {}",
                place(at_a, at_a.a),
                place(at_b, at_b.b),
                holes_and_use(at_b, "fell to", "fell to")
            ),
            (None, None) => {
                let lowest = |side: Side| {
                    self.memories
                        .iter()
                        .filter_map(|m| m.on(side).and_then(|memory| memory.lowest_largest_hole))
                        .min()
                };
                let said =
                    |value: Option<u64>| value.map_or("unknown".to_string(), crate::units::human);
                format!(
                    "Neither ran out of memory. The lowest largest hole of any memory: {} in {b}, {} in {a}.",
                    said(lowest(Side::B)),
                    said(lowest(Side::A))
                )
            }
        }
    }
}

/// Where a memory is, as a person names it: `GPU_FB_MEM 0x1e00000000000002 on node 0`.
fn place(matched: &MatchedMemory<'_>, memory: Option<&MemoryFigures>) -> String {
    format!(
        "{} {} on node {}",
        matched.kind,
        memory.map_or("?", |memory| memory.handle.as_str()),
        matched.node
    )
}

/// How B's largest hole and peak use compare with A's on one matched memory.
fn holes_and_use(matched: &MatchedMemory<'_>, b_verb: &str, a_verb: &str) -> String {
    let (Some(a), Some(b)) = (matched.a, matched.b) else {
        return format!(
            "the other run has no {} number {} on node {} to compare it with.",
            matched.kind, matched.ordinal, matched.node
        );
    };
    let hole = match (b.lowest_largest_hole, a.lowest_largest_hole) {
        (Some(hole_b), Some(hole_a)) => format!(
            "its largest hole {b_verb} {} where the other's {a_verb} {}",
            crate::units::human(hole_b),
            crate::units::human(hole_a)
        ),
        _ => "its largest hole is not known in both".to_string(),
    };
    let used = match (b.peak_used, a.peak_used) {
        (Some(used_b), Some(used_a)) if used_a > 0 => {
            let change = (used_b as f64 - used_a as f64) / used_a as f64 * 100.0;
            if change.abs() < 0.5 {
                "; peak used is the same".to_string()
            } else {
                format!(
                    "; peak used is {:.0}% {}",
                    change.abs(),
                    if change < 0.0 { "lower" } else { "higher" }
                )
            }
        }
        _ => String::new(),
    };
    format!("{hole}{used}.")
}
