//! Two runs side by side (`memstate compare`): their memories matched by node, kind and place
//! among the node's memories of that kind, the figures of each and their differences, the
//! provenances and client objects whose peak bytes changed most, the moments where a matched
//! memory's largest hole differs most between the runs, and a verdict a person reads first.

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

/// A run as compared: its memories, and each provenance's and client object's peak bytes held.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunFigures {
    pub run: String,
    pub memories: Vec<MemoryFigures>,
    /// (provenance, the most bytes it held at any one snapshot): allocations without one are
    /// counted under `None`.
    pub provenances: Vec<(Option<String>, u64)>,
    /// (client object id, the most bytes of the allocations holding its fields at any one
    /// snapshot): empty when the run names no objects.
    pub objects: Vec<(Option<String>, u64)>,
}

/// A memory at one snapshot, as the comparison places it in time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendPoint {
    /// Seconds since the run's first snapshot, or the seq (as the chart's x axis).
    pub x: f64,
    pub snapshot_id: i64,
    pub seq: i64,
    pub largest_hole: Option<u64>,
    pub used: Option<u64>,
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

/// A provenance's (or client object's) peak bytes in A and in B (0 where it does not appear).
#[derive(Debug, Clone, PartialEq)]
pub struct PeakChange {
    pub name: Option<String>,
    pub a: u64,
    pub b: u64,
}

impl PeakChange {
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
    pub provenances: Vec<PeakChange>,
    /// Largest change (either way) first; empty when neither run names client objects.
    pub objects: Vec<PeakChange>,
}

/// Where a matched memory's largest hole differs most between the runs: A's snapshot at that
/// moment and B's (each the latest of its run at or before it).
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    pub node: i64,
    pub kind: String,
    pub ordinal: i64,
    pub x: f64,
    pub a: TrendPoint,
    pub b: TrendPoint,
    /// The largest holes' difference there, either way.
    pub gap: u64,
    pub handle_a: String,
    pub handle_b: String,
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
    Comparison {
        a,
        b,
        memories,
        provenances: line_up(&a.provenances, &b.provenances),
        objects: line_up(&a.objects, &b.objects),
    }
}

/// Each name's peak in A and in B, largest change (either way) first, then by name.
fn line_up(a: &[(Option<String>, u64)], b: &[(Option<String>, u64)]) -> Vec<PeakChange> {
    let mut peaks: BTreeMap<&Option<String>, [u64; 2]> = BTreeMap::new();
    for (side, list) in [a, b].into_iter().enumerate() {
        for (name, bytes) in list {
            peaks.entry(name).or_default()[side] = *bytes;
        }
    }
    let mut changes: Vec<PeakChange> = peaks
        .into_iter()
        .map(|(name, [in_a, in_b])| PeakChange {
            name: name.clone(),
            a: in_a,
            b: in_b,
        })
        .collect();
    changes.sort_by(|x, y| {
        y.difference()
            .unsigned_abs()
            .cmp(&x.difference().unsigned_abs())
            .then_with(|| x.name.cmp(&y.name))
    });
    changes
}

/// The point of `points` (in x order) in force at `x`: the latest at or before it.
fn in_force(points: &[TrendPoint], x: f64) -> Option<&TrendPoint> {
    let after = points.partition_point(|point| point.x <= x);
    after.checked_sub(1).map(|at| &points[at])
}

/// For each memory matched on both sides, the moment its largest hole differs most between the
/// runs (the earliest such), from each run's points by memory id (x ascending); the `limit`
/// memories that differ most first. Both runs are read as steps: between two of its snapshots a
/// run is as its earlier one showed, and before its first it is not compared.
pub fn divergences(
    comparison: &Comparison<'_>,
    points_a: &std::collections::HashMap<i64, Vec<TrendPoint>>,
    points_b: &std::collections::HashMap<i64, Vec<TrendPoint>>,
    limit: usize,
) -> Vec<Divergence> {
    let mut found = Vec::new();
    for matched in &comparison.memories {
        let (Some(memory_a), Some(memory_b)) = (matched.a, matched.b) else {
            continue;
        };
        let (Some(line_a), Some(line_b)) = (
            points_a.get(&memory_a.memory_id),
            points_b.get(&memory_b.memory_id),
        ) else {
            continue;
        };
        let mut best: Option<Divergence> = None;
        for x in line_a.iter().chain(line_b.iter()).map(|point| point.x) {
            let (Some(a), Some(b)) = (in_force(line_a, x), in_force(line_b, x)) else {
                continue;
            };
            let (Some(hole_a), Some(hole_b)) = (a.largest_hole, b.largest_hole) else {
                continue;
            };
            let gap = hole_a.abs_diff(hole_b);
            let better = best
                .as_ref()
                .is_none_or(|best| gap > best.gap || (gap == best.gap && x < best.x));
            if better {
                best = Some(Divergence {
                    node: matched.node,
                    kind: matched.kind.clone(),
                    ordinal: matched.ordinal,
                    x,
                    a: *a,
                    b: *b,
                    gap,
                    handle_a: memory_a.handle.clone(),
                    handle_b: memory_b.handle.clone(),
                });
            }
        }
        found.extend(best.filter(|divergence| divergence.gap > 0));
    }
    found.sort_by(|x, y| {
        y.gap
            .cmp(&x.gap)
            .then_with(|| (x.node, &x.kind, x.ordinal).cmp(&(y.node, &y.kind, y.ordinal)))
    });
    found.truncate(limit);
    found
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn memory(memory_id: i64) -> MemoryFigures {
        MemoryFigures {
            node: 0,
            kind: "GPU_FB_MEM".into(),
            ordinal: 0,
            handle: format!("0x{memory_id:x}"),
            memory_id,
            peak_used: None,
            lowest_largest_hole: None,
            peak_fragmentation: None,
            failed_requests: 0,
        }
    }

    fn point(x: f64, snapshot_id: i64, hole: u64) -> TrendPoint {
        TrendPoint {
            x,
            snapshot_id,
            seq: snapshot_id,
            largest_hole: Some(hole),
            used: None,
        }
    }

    /// Snapshots at different moments: each run is read as its latest snapshot at or before a
    /// moment, and before its first it is not compared. A: 100 at 0, 50 at 10; B: 100 at 5, 90
    /// at 12. Differences: at 5, 0; at 10, 50 (A's 10 against B's 5); at 12, 40. At 0 B has none.
    #[test]
    fn runs_are_compared_as_steps_at_every_moment_either_has() {
        let a = RunFigures {
            run: "a".into(),
            memories: vec![memory(1)],
            ..RunFigures::default()
        };
        let b = RunFigures {
            run: "b".into(),
            memories: vec![memory(2)],
            ..RunFigures::default()
        };
        let comparison = compare(&a, &b);
        let points_a = HashMap::from([(1, vec![point(0.0, 10, 100), point(10.0, 11, 50)])]);
        let points_b = HashMap::from([(2, vec![point(5.0, 20, 100), point(12.0, 21, 90)])]);
        let found = divergences(&comparison, &points_a, &points_b, 10);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].x, found[0].gap), (10.0, 50));
        assert_eq!((found[0].a.snapshot_id, found[0].b.snapshot_id), (11, 20));
        // Runs that never differ give no moment.
        let same = divergences(
            &comparison,
            &points_a,
            &points_a.values().map(|v| (2, v.clone())).collect(),
            10,
        );
        assert!(same.is_empty());
    }
}
