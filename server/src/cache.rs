//! Read caches in front of the checkout and the state stores, so the read routes answer from
//! memory instead of walking the checkout and reading every release file per request.
//!
//! A value is served while it is younger than the TTL and, for release histories, while the
//! operation queue has not changed since it was read (an operation finishing here drops it at
//! once). What another process writes (a `kusionctl apply`, a worker on another machine) shows
//! within the TTL. Concurrent misses on one key wait for a single read instead of each doing it.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a listing or a release history is served from memory by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(2);

struct Slot<V> {
    read_at: Instant,
    /// The queue's change counter when the value was read.
    generation: u64,
    value: Arc<V>,
}

/// One key's value; the async lock is held while it is read, so concurrent misses read once.
type Cell<V> = Arc<tokio::sync::Mutex<Option<Slot<V>>>>;

/// Values by key, each read at most once per TTL (and per queue generation).
pub struct ReadCache<K, V> {
    ttl: Duration,
    slots: Mutex<HashMap<K, Cell<V>>>,
}

impl<K: Eq + Hash + Clone, V> ReadCache<K, V> {
    pub fn new(ttl: Duration) -> ReadCache<K, V> {
        ReadCache {
            ttl,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The cached value for `key` if still fresh at `generation`, else `read()`'s (stored on
    /// success; errors are not cached).
    pub async fn get<E, F>(&self, key: &K, generation: u64, read: F) -> Result<Arc<V>, E>
    where
        F: Future<Output = Result<V, E>>,
    {
        if self.ttl.is_zero() {
            return read.await.map(Arc::new);
        }
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(key.clone()).or_default().clone()
        };
        // Held across the read: the callers missing at the same time wait for this one.
        let mut slot = slot.lock().await;
        if let Some(s) = slot.as_ref()
            && s.generation == generation
            && s.read_at.elapsed() < self.ttl
        {
            return Ok(s.value.clone());
        }
        let read_at = Instant::now();
        let value = Arc::new(read.await?);
        *slot = Some(Slot {
            read_at,
            generation,
            value: value.clone(),
        });
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn reads_once_per_ttl_and_generation_and_never_caches_errors() {
        let cache: ReadCache<&str, usize> = ReadCache::new(Duration::from_millis(200));
        let reads = AtomicUsize::new(0);
        let read = || async { Ok::<_, String>(reads.fetch_add(1, Ordering::SeqCst) + 1) };
        assert_eq!(*cache.get(&"a", 0, read()).await.unwrap(), 1);
        assert_eq!(*cache.get(&"a", 0, read()).await.unwrap(), 1);
        assert_eq!(*cache.get(&"b", 0, read()).await.unwrap(), 2);
        // The queue changed: read again.
        assert_eq!(*cache.get(&"a", 1, read()).await.unwrap(), 3);
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(*cache.get(&"a", 1, read()).await.unwrap(), 4);
        let failed = cache
            .get(&"c", 1, async { Err::<usize, _>("no".to_string()) })
            .await;
        assert!(failed.is_err());
        assert_eq!(*cache.get(&"c", 1, read()).await.unwrap(), 5);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_misses_read_once() {
        let cache = Arc::new(ReadCache::<u8, usize>::new(Duration::from_secs(60)));
        let reads = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let (cache, reads) = (cache.clone(), reads.clone());
                tokio::spawn(async move {
                    cache
                        .get(&0, 0, async {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                            Ok::<_, String>(reads.fetch_add(1, Ordering::SeqCst))
                        })
                        .await
                        .map(|v| *v)
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(t.await.unwrap().unwrap(), 0);
        }
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_zero_ttl_always_reads() {
        let cache: ReadCache<u8, usize> = ReadCache::new(Duration::ZERO);
        let reads = AtomicUsize::new(0);
        for n in 1..=3 {
            let v = cache
                .get(&0, 0, async {
                    Ok::<_, String>(reads.fetch_add(1, Ordering::SeqCst) + 1)
                })
                .await
                .unwrap();
            assert_eq!(*v, n);
        }
    }
}
