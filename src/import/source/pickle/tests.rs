//! The pickle reader on pickles written here byte by byte, as Python writes them.

use super::*;

/// `pickle.dumps([{"action": "alloc", "addr": 2**40, "size": 512, "stream": 0,
/// "time_us": -5}, {"action": "alloc", "colour": 1}], protocol=4)` without its FRAME, as
/// Python writes it (MEMOIZE after each container and new string).
fn two_entries() -> Vec<u8> {
    let mut out = vec![0x80, 4, b']', 0x94, b'('];
    let string = |out: &mut Vec<u8>, text: &str| {
        out.extend_from_slice(&[0x8c, text.len() as u8]);
        out.extend_from_slice(text.as_bytes());
        out.push(0x94);
    };
    out.extend_from_slice(&[b'}', 0x94, b'(']);
    string(&mut out, "action"); // memo 2
    string(&mut out, "alloc"); // memo 3
    string(&mut out, "addr");
    out.extend_from_slice(&[0x8a, 6, 0, 0, 0, 0, 0, 1]);
    string(&mut out, "size");
    out.extend_from_slice(&[b'M', 0, 2]);
    string(&mut out, "stream");
    out.extend_from_slice(&[b'K', 0]);
    string(&mut out, "time_us");
    out.extend_from_slice(&[b'J', 0xfb, 0xff, 0xff, 0xff]);
    out.push(b'u');
    out.extend_from_slice(&[b'}', 0x94, b'(', b'h', 2, b'h', 3]);
    string(&mut out, "colour");
    out.extend_from_slice(&[b'K', 1, b'u', b'e', b'.']);
    out
}

#[test]
fn trace_entries_are_folded_and_other_dicts_kept() {
    let bytes = two_entries();
    let pickle = read(&bytes).unwrap();
    let items = pickle.items(pickle.root).unwrap().to_vec();
    let entry = pickle.trace_entry(items[0]).unwrap();
    assert_eq!(pickle.str(entry.action), Some("alloc"));
    assert_eq!(
        (entry.addr, entry.size, entry.time_us, entry.device_free),
        (Some(1 << 40), Some(512), Some(-5), None)
    );
    // A key no trace entry has: a dict, read as one.
    assert_eq!(pickle.trace_entry(items[1]), None);
    let colour = pickle.get(items[1], "colour").unwrap();
    assert_eq!(pickle.int(colour), Some(1));
    let action = pickle.get(items[1], "action").unwrap();
    assert_eq!(pickle.str(action), Some("alloc"));
}

/// Issue 27, item 5: 2 MB of EMPTY_LIST opcodes would hold about 96 MB of empty lists (48 bytes
/// each: a node, a list, a stack slot); the budget (three times the pickle plus 32 MiB, 38 MiB)
/// stops it by name, while the same count of list items in one list (4 bytes each) is read.
#[test]
fn a_pickle_that_builds_far_more_than_its_size_is_refused() {
    let mut bomb = vec![0x80, 4];
    bomb.extend(std::iter::repeat_n(b']', 2_000_000));
    bomb.push(b'.');
    let error = read(&bomb)
        .err()
        .map(|error| error.message)
        .unwrap_or_default();
    assert!(
        error.contains("builds more values than a PyTorch snapshot of its size could"),
        "{error}"
    );
    // One list of 500,000 small ints: 500,000 nodes of 16 bytes and 4-byte items, about 10 MB
    // from 1 MB, under the budget.
    let mut list = vec![0x80, 4, b']', b'('];
    for number in 0..500_000u32 {
        list.extend([b'K', (number % 256) as u8]);
    }
    list.extend([b'e', b'.']);
    let pickle = read(&list).unwrap();
    assert_eq!(pickle.items(pickle.root).map(<[_]>::len), Some(500_000));
}
