//! Where a story is seen: the fragment of a map page that opens on a memory, a snapshot and a
//! window of it, and a page's file as a URL a terminal or browser opens.

use std::path::Path;

/// The fragment that opens a page on a memory of a snapshot, zoomed to a window and some of its
/// surroundings (within the memory's `capacity`) when there is one:
/// `#memory=0x1e00000000000002&snapshot=34&range=A:B`.
pub fn fragment(
    handle: &str,
    snapshot_id: i64,
    window: Option<(u64, u64)>,
    capacity: u64,
) -> String {
    let mut fragment = format!("#memory={handle}&snapshot={snapshot_id}");
    if let Some((start, end)) = window {
        // Computed wide: a window may span almost all of a memory of nearly 2^63 bytes.
        let margin = (u128::from(end.saturating_sub(start)) * 3 / 10) as u64;
        fragment.push_str(&format!(
            "&range={}:{}",
            start.saturating_sub(margin),
            end.saturating_add(margin).min(capacity.max(end))
        ));
    }
    fragment
}

/// A page's file as a `file://` URL a terminal or browser opens (absolute, unsafe bytes escaped).
pub fn file_url(path: &Path) -> String {
    let absolute = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    format!(
        "file://{}",
        crate::units::percent_escaped(&absolute.display().to_string(), b"/+,=@:")
    )
}
