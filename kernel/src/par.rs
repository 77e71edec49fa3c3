//! Per-resource work spread over the machine's cores: large specs are checked and scanned
//! before any runtime call, and that part of a plan would otherwise run on one core.

/// `f` applied to every item, in order, on up to one thread per core (small inputs stay on
/// the caller's thread).
pub(crate) fn map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    const SMALL: usize = 2048;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if threads < 2 || items.len() < SMALL {
        return items.iter().map(f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
            .collect();
        parts
            .into_iter()
            .flat_map(|p| p.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn keeps_order_for_small_and_large_inputs() {
        for n in [0, 3, 10_000] {
            let items: Vec<usize> = (0..n).collect();
            assert_eq!(
                super::map(&items, |i| i * 2),
                (0..n).map(|i| i * 2).collect::<Vec<_>>()
            );
        }
    }
}
