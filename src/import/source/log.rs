//! Lines of a Realm log: `[N - THREAD] SECONDS {LEVEL}{LOGGER}: MESSAGE`, the prefix Realm's
//! logger writes before every message (legion `runtime/realm/logging.cc`). A line without it (a
//! line written straight to stderr, as the allocator status is) is all message, of no node.

/// One line, its prefix taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct LogLine<'t> {
    /// The node (Realm's address space) of the prefix.
    pub node: Option<i64>,
    /// The thread of the prefix: with the node, which lines belong together.
    pub thread: Option<&'t str>,
    /// Seconds since the process started, from the prefix.
    pub seconds: Option<f64>,
    pub message: &'t str,
}

/// Take a line's prefix apart; a line without one is all message.
pub fn parse(line: &str) -> LogLine<'_> {
    let plain = LogLine {
        node: None,
        thread: None,
        seconds: None,
        message: line.trim_end_matches('\r'),
    };
    let Some(rest) = line.trim_start().strip_prefix('[') else {
        return plain;
    };
    let Some((inside, after)) = rest.split_once(']') else {
        return plain;
    };
    let Some((node, thread)) = inside.split_once(" - ") else {
        return plain;
    };
    let Ok(node) = node.trim().parse::<i64>() else {
        return plain;
    };
    let after = after.trim_start();
    let (seconds, after) = match after.split_once(char::is_whitespace) {
        Some((number, rest)) => match number.parse::<f64>() {
            Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => {
                (Some(seconds), rest.trim_start())
            }
            _ => (None, after),
        },
        None => (None, after),
    };
    // `{LEVEL}{LOGGER}: ` before the message.
    let message = match after
        .strip_prefix('{')
        .and_then(|rest| rest.split_once("}: "))
    {
        Some((_, message)) => message,
        None => after,
    };
    LogLine {
        node: Some(node),
        thread: Some(thread.trim()),
        seconds,
        message: message.trim_end_matches('\r'),
    }
}

/// Nanoseconds from a prefix's seconds (0 without them).
pub fn time_ns(seconds: Option<f64>) -> i64 {
    seconds.map_or(0, |seconds| (seconds * 1e9).round().min(9.0e18) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_taken_apart() {
        let line = parse("[1 - 7f1c2d3e4700]    12.500000 {5}{legate}: Failed to allocate 8 bytes");
        assert_eq!(line.node, Some(1));
        assert_eq!(line.thread, Some("7f1c2d3e4700"));
        assert_eq!(line.seconds, Some(12.5));
        assert_eq!(line.message, "Failed to allocate 8 bytes");
        assert_eq!(time_ns(line.seconds), 12_500_000_000);
        let bare = parse("allocated_range_idx:3 first:0 last:8");
        assert_eq!(bare.node, None);
        assert_eq!(bare.message, "allocated_range_idx:3 first:0 last:8");
    }
}
