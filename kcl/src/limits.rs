//! Resource limits of one evaluation: collection sizes, time and memory.
//!
//! A runaway program (`[1 for i in range(10**9)]`, a 1000×1000×1000 comprehension) must end in
//! a clear error, not an allocator abort or a machine swapping for minutes. The limits are
//! generous by default and per thread (one program evaluates on one thread; `kusionctl compile
//! --all` runs each stack on its own, so a runaway stack fails alone):
//!
//! - **items**: no list, dict or string built by a range, comprehension or repetition may hold
//!   more than `max_items` items, checked before allocating;
//! - **time**: the evaluation stops after `timeout`, checked every few thousand loop steps;
//! - **memory**: the process's resident memory may not exceed `max_memory`, checked every
//!   64 Ki loop steps (process-wide: with several evaluations in one process it is their sum).

use std::cell::RefCell;
use std::time::{Duration, Instant};

use crate::value::RtError;

/// Limits of one evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most items in one collection (or bytes in one string) built by the program.
    pub max_items: usize,
    /// Most resident memory of the process, in bytes (0: no limit).
    pub max_memory: u64,
    /// Longest evaluation (None: no limit).
    pub timeout: Option<Duration>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_items: 100_000_000,
            max_memory: 4 << 30,
            timeout: Some(Duration::from_secs(600)),
        }
    }
}

impl Limits {
    /// No limits at all.
    pub fn none() -> Limits {
        Limits {
            max_items: usize::MAX,
            max_memory: 0,
            timeout: None,
        }
    }
}

struct Active {
    limits: Limits,
    deadline: Option<Instant>,
    ticks: u64,
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
}

/// Limits in force on this thread until the guard is dropped.
pub struct Guard {
    previous: Option<Active>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ACTIVE.with(|a| *a.borrow_mut() = previous);
    }
}

/// Put `limits` in force on this thread (the time limit counts from now).
pub fn enter(limits: Limits) -> Guard {
    let active = Active {
        limits,
        deadline: limits.timeout.map(|t| Instant::now() + t),
        ticks: 0,
    };
    Guard {
        previous: ACTIVE.with(|a| a.borrow_mut().replace(active)),
    }
}

/// Refuse building a collection of `n` items (`what` names it in the message).
pub fn check_items(n: usize, what: &str) -> Result<(), RtError> {
    ACTIVE.with(|a| match &*a.borrow() {
        Some(active) if n > active.limits.max_items => Err(RtError::eval(format!(
            "{what} would hold {n} items, more than the limit of {} (a runaway program? raise it with --max-items)",
            active.limits.max_items
        ))),
        _ => Ok(()),
    })
}

/// One step of a loop: checks the time every 4 Ki steps and memory every 64 Ki steps.
pub fn tick() -> Result<(), RtError> {
    ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        let Some(active) = a.as_mut() else {
            return Ok(());
        };
        active.ticks += 1;
        if active.ticks & 0xfff != 0 {
            return Ok(());
        }
        if let Some(deadline) = active.deadline
            && Instant::now() >= deadline
        {
            return Err(RtError::eval(format!(
                "the evaluation ran longer than the limit of {} (a runaway program? raise it with --timeout)",
                humantime::format_duration(active.limits.timeout.unwrap_or_default())
            )));
        }
        if active.ticks & 0xffff == 0 && active.limits.max_memory > 0 {
            let used = resident_bytes();
            if used > active.limits.max_memory {
                return Err(RtError::eval(format!(
                    "the evaluation uses {} MiB of memory, more than the limit of {} MiB (a runaway program? raise it with --max-memory)",
                    used >> 20,
                    active.limits.max_memory >> 20
                )));
            }
        }
        Ok(())
    })
}

/// Resident memory of this process (0 where it cannot be read).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

/// Parse a size such as `4GiB`, `512MiB`, `2G` or a number of bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 4GiB, 512MiB)"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_apply_only_while_entered() {
        check_items(usize::MAX, "x").unwrap();
        {
            let _g = enter(Limits {
                max_items: 10,
                max_memory: 0,
                timeout: Some(Duration::ZERO),
            });
            assert!(
                check_items(11, "a list")
                    .unwrap_err()
                    .msg
                    .contains("--max-items")
            );
            check_items(10, "a list").unwrap();
            let e = (0..10_000).try_for_each(|_| tick()).unwrap_err();
            assert!(e.msg.contains("--timeout"), "{}", e.msg);
        }
        check_items(usize::MAX, "x").unwrap();
        assert_eq!(parse_size("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert!(parse_size("lots").is_err());
    }
}
