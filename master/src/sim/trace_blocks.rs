//! Reading a line-based input in blocks of whole lines that parsing threads take while
//! the next block is read: a half-million-job trace is over 100 MB of JSON, which is then
//! never held whole, and its parsing overlaps its reading.

use std::io::{self, Read};
use std::sync::{Mutex, PoisonError, mpsc};

/// Bytes read per block: large against a block's hand-off, small enough that the
/// blocks in flight (one per thread, plus one queued each) stay a few tens of MB.
pub(super) const BLOCK_BYTES: usize = 4 << 20;

/// Whole lines of the input.
pub(super) struct Block {
    /// The 1-based number of the block's first line in the input.
    pub(super) first_line: usize,
    /// The lines, each ended by `\n` but perhaps the input's last.
    pub(super) text: String,
}

/// Reads `input` in blocks of about `block_bytes` (a longer line makes a longer block)
/// and maps each with `parse` on `threads` threads; the results are in input order.
pub(super) fn map_blocks<T: Send>(
    input: impl Read,
    block_bytes: usize,
    threads: usize,
    parse: impl Fn(&Block) -> T + Sync,
) -> io::Result<Vec<T>> {
    let (sender, receiver) = mpsc::sync_channel::<(usize, Block)>(threads);
    let (receiver, parse) = (&Mutex::new(receiver), &parse);
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(move || {
                    let mut done = Vec::new();
                    loop {
                        // The guard ends with this statement: the next worker may wait for a
                        // block while this one parses.
                        let next = receiver.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        let Ok((ix, block)) = next else { break };
                        done.push((ix, parse(&block)));
                    }
                    done
                })
            })
            .collect();
        let mut ix = 0;
        let read = read_blocks(input, block_bytes, |block| {
            ix += 1;
            sender.send((ix, block)).is_ok()
        });
        drop(sender);
        let mut results = Vec::new();
        for worker in workers {
            let done = worker.join().map_err(|_| io::Error::other("a trace parsing thread panicked"))?;
            results.extend(done);
        }
        read?;
        results.sort_unstable_by_key(|(ix, _)| *ix);
        Ok(results.into_iter().map(|(_, parsed)| parsed).collect())
    })
}

/// Hands `send` the input's whole lines, block by block, until the input ends or `send`
/// returns false.
fn read_blocks(
    mut input: impl Read,
    block_bytes: usize,
    mut send: impl FnMut(Block) -> bool,
) -> io::Result<()> {
    let mut pending = Vec::new();
    let mut next_line = 1;
    loop {
        let read = (&mut input).take(block_bytes as u64).read_to_end(&mut pending)?;
        let at_end = read == 0;
        let cut = if at_end {
            pending.len()
        } else {
            match pending.iter().rposition(|&b| b == b'\n') {
                Some(newline) => newline + 1,
                None => continue, // a line longer than a block: read on
            }
        };
        if cut == 0 {
            return Ok(());
        }
        // The next block starts with the partial line, in room for a whole block: grown
        // by doubling instead, each block was copied again on the way to its size.
        let mut rest = Vec::with_capacity(pending.len() - cut + block_bytes + 1);
        rest.extend_from_slice(&pending[cut..]);
        pending.truncate(cut);
        let text = String::from_utf8(std::mem::replace(&mut pending, rest))
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "stream did not contain valid UTF-8"))?;
        let lines = count_newlines(text.as_bytes());
        if !send(Block { first_line: next_line, text }) || at_end {
            return Ok(());
        }
        next_line += lines;
    }
}

/// The newlines in `bytes`, counted in runs of at most 255 bytes into a byte, which the
/// compiler turns into comparisons of many bytes at once (`filter().count()` compared
/// them one at a time, 2.5 instructions a byte: a third of the reading thread's work).
fn count_newlines(bytes: &[u8]) -> usize {
    bytes.chunks(255).map(|run| usize::from(run.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>())).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each block's lines with their numbers, in input order.
    fn numbered(input: &str, block_bytes: usize, threads: usize) -> Vec<(usize, String)> {
        let blocks = map_blocks(input.as_bytes(), block_bytes, threads, |block| {
            block
                .text
                .lines()
                .enumerate()
                .map(|(n, l)| (block.first_line + n, l.to_owned()))
                .collect::<Vec<_>>()
        });
        blocks.unwrap().into_iter().flatten().collect()
    }

    #[test]
    fn lines_keep_their_numbers_and_order_across_blocks() {
        let input: String = (1..=200).map(|n| format!("line {n}\n")).collect();
        let expected: Vec<(usize, String)> = (1..=200).map(|n| (n, format!("line {n}"))).collect();
        for (block_bytes, threads) in [(7, 3), (64, 2), (1 << 20, 4), (1, 1)] {
            assert_eq!(numbered(&input, block_bytes, threads), expected, "blocks of {block_bytes}");
        }
    }

    #[test]
    fn a_line_longer_than_a_block_and_a_last_line_without_newline_are_whole() {
        let long = "x".repeat(50);
        let input = format!("a\n{long}\n\nb");
        let lines = numbered(&input, 8, 2);
        assert_eq!(lines, [(1, "a".into()), (2, long), (3, String::new()), (4, "b".into())]);
        assert!(numbered("", 8, 2).is_empty());
    }

    #[test]
    fn newlines_are_counted_across_runs_of_bytes() {
        let text: String = (0..1000).map(|n| if n % 3 == 0 { '\n' } else { 'x' }).collect();
        assert_eq!(count_newlines(text.as_bytes()), 334);
        assert_eq!(count_newlines(&[b'\n'; 600]), 600);
        assert_eq!(count_newlines(b""), 0);
    }

    #[test]
    fn input_that_is_not_utf8_is_refused() {
        let err = map_blocks(&b"ok\n\xff\n"[..], 8, 2, |_| ()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
