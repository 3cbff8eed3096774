//! Seeds run on several threads, with the same report as on one: the range is cut into
//! blocks, idle threads take the next block, and the blocks' results are put back in seed
//! order. A seed's run depends on its seed alone, so only wall time changes with `jobs`.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Seeds per block: small enough that two threads finish together, large enough that
/// taking a block costs nothing beside running it.
pub(crate) const BLOCK: u64 = 32;

/// The most threads an exploration runs on.
pub const MAX_JOBS: usize = 64;

/// `f` over `range` cut into blocks of [`BLOCK`] seeds, on up to `jobs` threads; the
/// results in seed order. One job runs on the calling thread.
pub(crate) fn map_blocks<T: Send>(
    range: Range<u64>,
    jobs: usize,
    f: impl Fn(Range<u64>) -> T + Sync,
) -> Vec<T> {
    let blocks = (range.end - range.start).div_ceil(BLOCK);
    let block = |i: u64| {
        let start = range.start + i * BLOCK;
        start..(start + BLOCK).min(range.end)
    };
    let jobs = jobs
        .clamp(1, MAX_JOBS)
        .min(usize::try_from(blocks).unwrap_or(usize::MAX));
    if jobs <= 1 {
        return (0..blocks).map(|i| f(block(i))).collect();
    }
    let next = AtomicU64::new(0);
    let done: Mutex<Vec<(u64, T)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= blocks {
                        break;
                    }
                    let out = f(block(i));
                    done.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, out));
                }
            });
        }
    });
    let mut done = done
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, out)| out).collect()
}

/// `f` over `items`, on up to `jobs` threads; the results in the items' order.
pub(crate) fn map_items<I: Sync, T: Send>(
    items: &[I],
    jobs: usize,
    f: impl Fn(&I) -> T + Sync,
) -> Vec<T> {
    let n = items.len() as u64;
    let mut out = Vec::with_capacity(items.len());
    let per_block = map_blocks(0..n, jobs, |r| {
        r.map(|i| f(&items[usize::try_from(i).unwrap_or(usize::MAX)]))
            .collect::<Vec<T>>()
    });
    for block in per_block {
        out.extend(block);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_come_back_in_seed_order_whatever_the_thread_count() {
        let one = map_blocks(5..300, 1, |r| r.collect::<Vec<u64>>());
        for jobs in [2, 3, 8] {
            assert_eq!(map_blocks(5..300, jobs, |r| r.collect::<Vec<u64>>()), one);
        }
        let flat: Vec<u64> = one.into_iter().flatten().collect();
        assert_eq!(flat, (5..300).collect::<Vec<_>>());
        assert_eq!(
            map_items(&[3, 1, 2], 4, |x| x * 10),
            vec![30, 10, 20],
            "items keep their order"
        );
        assert!(map_blocks(7..7, 4, |r| r.count()).is_empty());
    }
}
