//! The local state loader, checker and repair on arbitrary `state.json` and `journal.jsonl`
//! bytes: errors naming the damage, never a panic; after a repair the state loads or names
//! an unreadable snapshot.
#![no_main]
use kusion_kernel::state::{LeaseHolder, LocalStore, StateStore};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let split = data.first().map_or(0, |b| *b as usize).min(data.len().saturating_sub(1));
    let (snapshot, journal) = data.get(1..).unwrap_or_default().split_at(split.min(data.len().saturating_sub(1)));
    let dir = tempfile::tempdir().unwrap();
    if !snapshot.is_empty() {
        std::fs::write(dir.path().join("state.json"), snapshot).unwrap();
    }
    std::fs::write(dir.path().join("journal.jsonl"), journal).unwrap();
    let store = LocalStore::new(dir.path());
    let _ = store.load();
    let _ = kusion_kernel::state::check::check(&store);
    if let Ok(lease) = store.acquire_lease(&LeaseHolder::current("fuzz"), 60_000) {
        if store.repair(&lease).is_ok() && serde_json::from_slice::<serde_json::Value>(snapshot).is_ok() {
            let _ = store.load();
        }
    }
});
