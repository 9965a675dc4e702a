//! Seeing the memory: [`terminal`] draws a proportional bar per memory, [`html`] writes one
//! self-contained interactive page, [`page`] makes one from stories and what was gathered for it,
//! [`plot`] draws trend charts as SVG, [`compare_page`] puts two runs side by side. The painting rules shared
//! by the first two live here: what fills each byte of a memory, one category per byte.

pub mod compare_page;
pub mod html;
pub mod page;
pub mod plot;
pub mod terminal;

/// The colour of a failure wherever it is drawn: the map's OOM marks and failed request, the
/// chart's failed memory, its OOM marks and its failed request (map.html spells it out).
pub const FAILURE_COLOUR: (u8, u8, u8) = (0xc0, 0x39, 0x2b);

use crate::analysis::Layout;
use crate::dump::figures::{merge, subtract};
use crate::dump::{Range, State};

/// What fills a byte of a memory, in drawing order (later wins where two overlap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fill {
    Unaccounted,
    Hole,
    PendingFree,
    Collectable,
    Valid,
    PendingAlloc,
}

impl Fill {
    pub const ALL: [Fill; 6] = [
        Fill::Valid,
        Fill::Collectable,
        Fill::PendingFree,
        Fill::PendingAlloc,
        Fill::Hole,
        Fill::Unaccounted,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fill::Valid => "valid",
            Fill::Collectable => "collectable",
            Fill::PendingFree => "pending_free",
            Fill::PendingAlloc => "pending_alloc",
            Fill::Hole => "hole",
            Fill::Unaccounted => "unaccounted",
        }
    }

    pub fn of_state(state: State) -> Fill {
        match state {
            State::Valid => Fill::Valid,
            State::Collectable => Fill::Collectable,
            State::PendingFree => Fill::PendingFree,
            State::PendingAlloc => Fill::PendingAlloc,
        }
    }
}

/// The memory as disjoint painted segments, sorted by offset: allocations (a pending_alloc wins
/// over the pending_free under it), holes, and unaccounted bytes.
pub fn segments(layout: &Layout) -> Vec<(Range, Fill)> {
    let pending_alloc = merge(
        layout
            .allocations
            .iter()
            .filter(|a| a.state == State::PendingAlloc)
            .map(|a| a.range()),
    );
    let mut painted: Vec<(Range, Fill)> = Vec::new();
    for allocation in &layout.allocations {
        let fill = Fill::of_state(allocation.state);
        if fill == Fill::PendingFree {
            // Only the parts not claimed by a deferred allocation.
            for part in subtract(&[allocation.range()], &pending_alloc) {
                painted.push((part, fill));
            }
        } else {
            painted.push((allocation.range(), fill));
        }
    }
    for hole in &layout.holes {
        painted.push((*hole, Fill::Hole));
    }
    for range in layout.unaccounted() {
        painted.push((range, Fill::Unaccounted));
    }
    painted.sort_by_key(|(range, fill)| (range.offset, *fill));
    painted
}

/// For `cells` equal cells over `[start, end)`: the fill covering most bytes of each cell.
pub fn cells(segments: &[(Range, Fill)], start: u64, end: u64, cells: usize) -> Vec<Option<Fill>> {
    let span = end.saturating_sub(start).max(1);
    let mut bytes = vec![[0u64; 6]; cells];
    let first = segments.partition_point(|(range, _)| range.end() <= start);
    for (range, fill) in &segments[first..] {
        if range.offset >= end {
            break;
        }
        let low = range.offset.max(start);
        let high = range.end().min(end);
        let mut position = low;
        while position < high {
            let cell = (((position - start) as u128 * cells as u128) / span as u128) as usize;
            let cell_end =
                start + ((cell as u128 + 1) * span as u128).div_ceil(cells as u128) as u64;
            let upto = high.min(cell_end.max(position + 1));
            bytes[cell.min(cells - 1)][*fill as usize] += upto - position;
            position = upto;
        }
    }
    bytes
        .iter()
        .map(|counts| {
            let (index, most) = counts
                .iter()
                .enumerate()
                .max_by_key(|(index, count)| (**count, *index))?;
            (*most > 0).then(|| {
                [
                    Fill::Unaccounted,
                    Fill::Hole,
                    Fill::PendingFree,
                    Fill::Collectable,
                    Fill::Valid,
                    Fill::PendingAlloc,
                ][index]
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_map_and_the_chart_draw_a_failure_in_one_colour() {
        let (red, green, blue) = super::FAILURE_COLOUR;
        let colour = format!("#{red:02x}{green:02x}{blue:02x}");
        let page = include_str!("map.html");
        assert!(
            page.contains(&colour),
            "map.html draws failures in {colour}"
        );
        assert!(
            !page.contains("#b01c1c"),
            "no second red for failures in map.html"
        );
    }
}
