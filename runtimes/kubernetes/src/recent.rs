//! What the last read of an object found, kept for a moment.
//!
//! A plan reads every resource and then asks for a dry-run of it, back to back. When the read
//! has just said the object is absent, or that it already holds every value kusion would apply,
//! the dry-run's answer is known without asking the server again: that halves the round trips
//! of a first apply's plan and of a no-change preview. Anything that writes the object through
//! this runtime forgets what was seen, and a memory older than [`FRESH`] is never used.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long a read's answer may stand in for the server. A plan's read and dry-run of one
/// resource are milliseconds apart; this only bounds how stale an unused memory can get.
pub const FRESH: Duration = Duration::from_secs(5);
/// Above this many memories, stale ones are dropped on the next insert.
const PRUNE_AT: usize = 4096;

/// What a read found: `None` for absent, else the live object as the server returned it.
pub type Seen = Option<Value>;

#[derive(Default)]
pub struct Recent {
    map: Mutex<HashMap<String, (Instant, Seen)>>,
}

impl Recent {
    /// Remember what a read of `id` found just now.
    pub fn remember(&self, id: &str, seen: Seen) {
        let Ok(mut map) = self.map.lock() else {
            return;
        };
        if map.len() >= PRUNE_AT {
            map.retain(|_, (at, _)| at.elapsed() < FRESH);
        }
        map.insert(id.to_string(), (Instant::now(), seen));
    }

    /// Take what a fresh read of `id` found, if there was one (`Some(None)`: absent).
    pub fn take(&self, id: &str) -> Option<Seen> {
        let (at, seen) = self.map.lock().ok()?.remove(id)?;
        (at.elapsed() < FRESH).then_some(seen)
    }

    /// The object is being changed: what was seen no longer holds.
    pub fn forget(&self, id: &str) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(id);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn taken_once_and_forgotten_on_write() {
        let recent = Recent::default();
        assert_eq!(recent.take("a"), None, "nothing seen");
        recent.remember("a", None);
        assert_eq!(recent.take("a"), Some(None), "seen absent");
        assert_eq!(recent.take("a"), None, "used once");
        recent.remember("b", Some(json!({"kind": "ConfigMap"})));
        recent.forget("b");
        assert_eq!(recent.take("b"), None);
    }

    #[test]
    fn many_memories_stay_bounded_by_staleness() {
        let recent = Recent::default();
        for i in 0..PRUNE_AT + 10 {
            recent.remember(&i.to_string(), None);
        }
        // All fresh: nothing may be dropped yet.
        assert_eq!(recent.len(), PRUNE_AT + 10);
        if let Ok(mut map) = recent.map.lock() {
            for (at, _) in map.values_mut() {
                if let Some(old) = at.checked_sub(FRESH) {
                    *at = old;
                }
            }
        }
        assert_eq!(recent.take("1"), None, "a stale memory is not used");
        recent.remember("new", None);
        assert_eq!(recent.len(), 1);
    }
}
