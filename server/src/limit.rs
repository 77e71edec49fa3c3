//! Refusing callers that keep presenting unknown tokens: each such request costs a token-store
//! lookup (a PostgreSQL query when the tokens are shared), and a stream of guesses is either an
//! attack or a broken client. Past [`FAILURE_LIMIT`] refusals within [`FAILURE_WINDOW`], a client
//! address is answered 429 with `Retry-After` until its window ends, before any lookup. Tokens
//! the server has verified recently are still honoured from memory (a client behind the same
//! address with a good token keeps working where the store's cache allows).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Refusals of unknown, revoked or expired tokens one client address may cause per window.
pub const FAILURE_LIMIT: u32 = 30;
/// The window the refusals are counted in.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at most (older windows are dropped first when it fills).
const TRACKED_MAX: usize = 50_000;

/// Per client address: when its window started and how many refusals it has seen.
#[derive(Default)]
pub struct AuthFailures {
    windows: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl AuthFailures {
    /// How long `ip` must wait, when it is over the limit.
    pub fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        let windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let (start, count) = windows.get(&ip)?;
        let left = FAILURE_WINDOW.checked_sub(start.elapsed())?;
        (*count >= FAILURE_LIMIT).then_some(left)
    }

    /// Counts a refused token from `ip`.
    pub fn failed(&self, ip: IpAddr) {
        let mut windows = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        if windows.len() >= TRACKED_MAX {
            windows.retain(|_, (start, _)| start.elapsed() < FAILURE_WINDOW);
            if windows.len() >= TRACKED_MAX {
                windows.clear();
            }
        }
        let entry = windows.entry(ip).or_insert((Instant::now(), 0));
        if entry.0.elapsed() >= FAILURE_WINDOW {
            *entry = (Instant::now(), 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_past_the_limit_and_others_are_not() {
        let failures = AuthFailures::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        for _ in 0..FAILURE_LIMIT - 1 {
            failures.failed(a);
        }
        assert!(failures.blocked(a).is_none());
        failures.failed(a);
        let wait = failures.blocked(a).expect("over the limit");
        assert!(wait <= FAILURE_WINDOW && wait > FAILURE_WINDOW - Duration::from_secs(5));
        assert!(failures.blocked(b).is_none());
    }
}
