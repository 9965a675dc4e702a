//! Text for many items written by every core, in the items' order: each item's text depends on
//! it alone (a memory's blockers, say), so rounds of items are split among threads, each writes
//! its share into a buffer, and the buffers go out in order. Memory stays one round's text.

use std::io::{self, Write};
use std::thread;

/// Items a thread writes in one round.
const SHARE: usize = 256;

/// Write `write`'s text for every item to `out`, in order, with up to one thread per core.
pub fn write_each<T, F>(items: &[T], out: &mut dyn Write, write: F) -> io::Result<()>
where
    T: Sync,
    F: Fn(&T, &mut dyn Write) -> io::Result<()> + Sync,
{
    let threads = thread::available_parallelism().map_or(1, |count| count.get().min(8));
    let write_share = |share: &[T]| -> io::Result<Vec<u8>> {
        let mut text = Vec::new();
        for item in share {
            write(item, &mut text)?;
        }
        Ok(text)
    };
    if threads == 1 || items.len() <= SHARE {
        return out.write_all(&write_share(items)?);
    }
    for round in items.chunks(SHARE * threads) {
        let texts: Vec<io::Result<Vec<u8>>> = thread::scope(|scope| {
            let workers: Vec<_> = round
                .chunks(SHARE)
                .map(|share| scope.spawn(move || write_share(share)))
                .collect();
            workers
                .into_iter()
                .map(|worker| {
                    worker.join().unwrap_or_else(|_| {
                        Err(io::Error::other("a thread writing the text stopped"))
                    })
                })
                .collect()
        });
        for text in texts {
            out.write_all(&text?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text is each item's in order, whatever the number of rounds and shares, and the first
    /// error stops it.
    #[test]
    fn every_item_is_written_in_order() {
        for count in [0, 1, SHARE - 1, SHARE, SHARE + 1, 5 * SHARE + 17] {
            let items: Vec<usize> = (0..count).collect();
            let mut out = Vec::new();
            write_each(&items, &mut out, |item, out| writeln!(out, "item {item}")).unwrap();
            let expected: String = (0..count).map(|item| format!("item {item}\n")).collect();
            assert_eq!(String::from_utf8(out).unwrap(), expected, "{count} items");
        }
        let items: Vec<usize> = (0..3 * SHARE).collect();
        let failed = write_each(&items, &mut Vec::new(), |item, out| {
            if *item == SHARE + 5 {
                Err(io::Error::other("refused"))
            } else {
                writeln!(out, "{item}")
            }
        });
        assert_eq!(failed.unwrap_err().to_string(), "refused");
    }
}
