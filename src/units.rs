//! Sizes and figures as people write and read them: parsing `512MiB`, showing `1.5 GiB`, offsets in
//! hex, ratios with a fixed number of decimals, and text made safe for a terminal. Every command
//! shows the same figure the same way because they all come here.

use std::borrow::Cow;

/// Parse a size: bytes (`1048576`, exact) or a number with a binary unit (`16GiB`, `512MiB`,
/// `1.5g`, `64k`; KB, MB... mean the binary units too, as in Realm's flags).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    // Hex, as every command prints offsets (0x100000): bytes, no unit.
    if let Some(digits) = trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
    {
        return u64::from_str_radix(&digits.replace('_', ""), 16)
            .ok()
            .filter(|&bytes| bytes <= i64::MAX as u64)
            .ok_or_else(|| format!("{text:?} is not a size in hex below 2^63 (0x100000)"));
    }
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit {other:?} in {text:?} (use B, KiB, MiB, GiB, TiB)"
            ))
        }
    };
    let not_a_size = || format!("{text:?} is not a size (try 16GiB, 512MiB or 1048576)");
    // Whole numbers are taken exactly; only a fraction goes through floating point.
    if let Ok(whole) = number.parse::<u64>() {
        return whole
            .checked_mul(multiplier)
            .filter(|&bytes| bytes <= i64::MAX as u64)
            .ok_or_else(|| format!("{text:?} is out of range"));
    }
    let value: f64 = number.parse().map_err(|_| not_a_size())?;
    let bytes = value * multiplier as f64;
    if !(bytes.is_finite() && (0.0..9.2e18).contains(&bytes)) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes.round() as u64)
}

/// [`parse_size`], refusing 0.
pub fn parse_positive_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err(format!("{text:?}: expected a size above 0")),
        bytes => Ok(bytes),
    }
}

/// `1536` → `1.5 KiB`; below 1 KiB the exact count of bytes.
pub fn human_size(bytes: i64) -> String {
    if bytes.unsigned_abs() < 1024 {
        return format!("{bytes} B");
    }
    scaled(bytes.unsigned_abs() as f64, bytes < 0)
}

/// [`human_size`] of a number of bytes that may lie beyond 64-bit integers (a sum the database
/// gave as a real number because it passed 2^63 - 1).
pub fn human_size_real(bytes: f64) -> String {
    if bytes.is_finite() && bytes.abs() < 9.0e18 {
        return human_size(bytes.round() as i64);
    }
    scaled(bytes.abs(), bytes < 0.0)
}

/// A magnitude of at least 1 KiB in the largest binary unit that keeps it at or above 1.
fn scaled(magnitude: f64, negative: bool) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut value = magnitude / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let sign = if negative { "-" } else { "" };
    let tenths = (value.fract() * 10.0).round();
    let shown = if value.fract() == 0.0 {
        // Whole (most sizes are): written as the integer it is, which is what `{:.0}` writes,
        // without formatting a float.
        (value as u64).to_string()
    } else if value >= 100.0 || tenths == 0.0 || tenths == 10.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    };
    format!("{sign}{shown} {}", UNITS[unit])
}

/// [`human_size`] of an unsigned count.
pub fn human(bytes: u64) -> String {
    match i64::try_from(bytes) {
        Ok(bytes) => human_size(bytes),
        Err(_) => scaled(bytes as f64, false),
    }
}

/// An offset (an address inside a memory) as people compare them: hex.
pub fn hex_offset(offset: i64) -> String {
    if offset < 0 {
        format!("-0x{:x}", offset.unsigned_abs())
    } else {
        format!("0x{offset:x}")
    }
}

/// A ratio from 0 to 1 (fragmentation, a share): always three decimals.
pub fn ratio(value: f64) -> String {
    format!("{value:.3}")
}

/// Seconds: always three decimals (milliseconds).
pub fn seconds(value: f64) -> String {
    format!("{value:.3}")
}

/// Text from a dump or a file name, made safe to print on a terminal: control characters (ESC,
/// BEL, C1 controls, DEL...) are shown as escapes, so a dump cannot move the cursor, change
/// colours or retitle the window. Newlines and tabs inside a value are escaped too (a value stays
/// on its line); machine-readable formats never go through this.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_control(c) {
            match c {
                '\n' => shown.push_str("\\n"),
                '\t' => shown.push_str("\\t"),
                '\r' => shown.push_str("\\r"),
                c if (c as u32) < 0x100 => shown.push_str(&format!("\\x{:02x}", c as u32)),
                c => shown.push_str(&format!("\\u{{{:x}}}", c as u32)),
            }
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

/// [`visible`] for a message that may span lines: each line is made visible, the newlines kept.
pub fn visible_lines(text: &str) -> String {
    text.split('\n').map(visible).collect::<Vec<_>>().join("\n")
}

fn is_control(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `1 allocation`, `2 allocations`: a count and its noun, plural unless one.
pub fn counted(count: u64, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// `text` for a URL or URI: every byte but ASCII letters, digits, `-_.~` and those in `also`
/// written as `%XX`.
pub fn percent_escaped(text: &str, also: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) || also.contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A duration: a number and ns, us, ms, s or m (250us, 500ms, 2s, 1.5s, 1m).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let split = text.find(|c: char| c.is_alphabetic()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?}: expected a duration such as 500ms, 2s or 1m"))?;
    let seconds = match unit.trim() {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1000.0,
        "s" | "" => value,
        "m" | "min" => value * 60.0,
        _ => {
            return Err(format!(
                "{text:?}: expected a duration such as 500ms, 2s or 1m"
            ))
        }
    };
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{text:?}: expected a duration from 0 up"))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146097 + day_of_era - 719468
}

/// The date of a count of days since 1970-01-01 (the inverse of [`days_from_civil`]).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719468;
    let era = days.div_euclid(146097);
    let day_of_era = days - era * 146097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// An RFC 3339 time in UTC with nanoseconds: `2026-12-01T08:00:01.500000000Z`.
pub fn rfc3339_utc(unix_seconds: i64, nanos: u32) -> String {
    let (year, month, day) = civil_from_days(unix_seconds.div_euclid(86400));
    let second_of_day = unix_seconds.rem_euclid(86400);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// Whole seconds since the Unix epoch of an RFC 3339 time (`2026-12-01T10:00:01.5Z`,
/// `...+01:00`; the fraction is dropped, a leap second counts as the next second); `None` for
/// anything else. The dump reader's check of `wall_time` is this.
pub fn unix_seconds(text: &str) -> Option<i64> {
    let number = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        part.bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| part.parse().ok())
            .flatten()
    };
    let bytes = text.as_bytes();
    if bytes.len() < 20
        || bytes[4] != b'-'
        || bytes[7] != b'-'
        || !matches!(bytes[10], b'T' | b't' | b' ')
        || bytes[13] != b':'
        || bytes[16] != b':'
    {
        return None;
    }
    let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
    let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &fraction[digits..];
    }
    let offset = match rest.as_bytes() {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2]
            if [h1, h2, m1, m2].iter().all(|byte| byte.is_ascii_digit()) =>
        {
            let digit = |byte: &u8| i64::from(byte - b'0');
            let minutes = (digit(h1) * 10 + digit(h2)) * 60 + digit(m1) * 10 + digit(m2);
            if *sign == b'+' {
                minutes * 60
            } else {
                -minutes * 60
            }
        }
        _ => return None,
    };
    Some(days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_past_64_bits_read_in_units() {
        // 2^64 - 2 bytes is 16 EiB less two bytes; 20 * 2^60 is 20 EiB.
        assert_eq!(human(u64::MAX - 1), "16 EiB");
        assert_eq!(human_size_real(20.0 * (1u64 << 60) as f64), "20 EiB");
        assert_eq!(human_size_real(-1536.0), "-1.5 KiB");
        assert_eq!(human_size_real(1023.0), "1023 B");
    }

    #[test]
    fn sizes_and_offsets_parse_in_hex() {
        // As every command prints offsets (issue 18, item 2).
        assert_eq!(parse_size("0x100000"), Ok(1 << 20));
        assert_eq!(parse_size("0X1e00"), Ok(0x1e00));
        assert_eq!(parse_size("0x0"), Ok(0));
        assert_eq!(parse_size("0x7fffffffffffffff"), Ok(i64::MAX as u64));
        assert!(parse_size("0x8000000000000000").is_err());
        assert!(parse_size("0x").is_err());
        assert!(parse_size("0xg").is_err());
        assert!(parse_positive_size("0x0").is_err());
    }

    #[test]
    fn sizes_parse_exactly_and_in_units() {
        assert_eq!(parse_size("16GiB"), Ok(16 << 30));
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("1048576"), Ok(1048576));
        assert_eq!(
            parse_size("9007199254740993"),
            Ok(9007199254740993),
            "exact beyond 2^53"
        );
        assert_eq!(parse_size("0"), Ok(0));
        assert!(parse_positive_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12 parsecs").is_err());
        assert!(parse_size("9223372036854775808").is_err());
        assert!(parse_size("16777216TiB").is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1024), "1 KiB");
        assert_eq!(human_size(1536), "1.5 KiB");
        assert_eq!(human_size(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
        assert_eq!(human_size(225280), "220 KiB");
        assert_eq!(human_size(-2048), "-2 KiB");
        assert_eq!(hex_offset(655360), "0xa0000");
        assert_eq!(ratio(0.303797), "0.304");
        // Whole multiples of every unit read as that whole number; one byte over, rounded.
        for (power, unit) in ["KiB", "MiB", "GiB", "TiB", "PiB"].iter().enumerate() {
            let one = 1i64 << (10 * (power + 1));
            for count in [1, 7, 99, 100, 999, 1023] {
                assert_eq!(human_size(count * one), format!("{count} {unit}"));
                assert_eq!(human_size(count * one + 1), format!("{count} {unit}"));
            }
            assert_eq!(human_size(one * 3 / 2 + 1), format!("1.5 {unit}"));
        }
    }

    #[test]
    fn control_characters_are_shown_not_obeyed() {
        assert_eq!(visible("train.py:42"), "train.py:42");
        assert_eq!(visible("a\u{1b}[2Jb\u{7}"), "a\\x1b[2Jb\\x07");
        assert_eq!(visible("x\u{9b}31m"), "x\\x9b31m");
        assert_eq!(visible("two\nlines"), "two\\nlines");
        assert_eq!(visible("\u{202e}txt.exe"), "\\u{202e}txt.exe");
        assert_eq!(visible_lines("first \u{1b}\nsecond"), "first \\x1b\nsecond");
        assert_eq!(visible("ünïcödé"), "ünïcödé");
    }

    /// Against `date -u -d @S +%Y-%m-%dT%H:%M:%S` worked out by hand: the epoch, a leap day, the
    /// turn of a century that is not a leap year, one before 1970.
    #[test]
    fn wall_times_format_and_read_back() {
        assert_eq!(rfc3339_utc(0, 0), "1970-01-01T00:00:00.000000000Z");
        // 2024-02-29 is day 19782 since the epoch: 19782 * 86400 + 12:34:56.
        assert_eq!(
            rfc3339_utc(19782 * 86400 + 45296, 500_000_000),
            "2024-02-29T12:34:56.500000000Z"
        );
        // 2100-03-01: 2100 is no leap year, so the day after 2100-02-28 (day 47540).
        assert_eq!(
            rfc3339_utc(47541 * 86400, 0),
            "2100-03-01T00:00:00.000000000Z"
        );
        assert_eq!(rfc3339_utc(-1, 0), "1969-12-31T23:59:59.000000000Z");
        assert_eq!(
            unix_seconds("2024-02-29T12:34:56.5Z"),
            Some(19782 * 86400 + 45296)
        );
        assert_eq!(
            unix_seconds("2024-02-29T13:34:56+01:00"),
            Some(19782 * 86400 + 45296)
        );
        assert_eq!(
            unix_seconds("2024-02-29t07:04:56-05:30"),
            Some(19782 * 86400 + 45296)
        );
        assert_eq!(
            unix_seconds("2016-12-31T23:59:60Z"),
            unix_seconds("2017-01-01T00:00:00Z")
        );
        for bad in [
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:34:56",
            "2024-02-29T12:34:56.Z",
            "now",
            "2024-02-29T12:34:56++5:30",
            "2024-02-29T12:34:56+05:3x",
        ] {
            assert_eq!(unix_seconds(bad), None, "{bad}");
        }
        for seconds in [
            0i64,
            951_782_400,
            1_796_112_000,
            4_102_444_800,
            -86_400 * 365,
        ] {
            assert_eq!(unix_seconds(&rfc3339_utc(seconds, 0)), Some(seconds));
        }
    }

    #[test]
    fn urls_keep_plain_bytes_and_escape_the_rest() {
        assert_eq!(percent_escaped("a b/ü:x", b"/"), "a%20b/%C3%BC%3Ax");
        assert_eq!(percent_escaped("run-1_2.~", b""), "run-1_2.~");
    }

    #[test]
    fn durations_in_milliseconds_seconds_and_minutes() {
        use std::time::Duration;
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        for bad in ["", "fast", "5h", "-1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
