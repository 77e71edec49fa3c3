//! Interned identifiers: a [`Symbol`] is a `u32`, so name comparison and hashing in the
//! evaluator cost one integer operation. Strings are leaked once per distinct name, which is
//! bounded by the vocabulary of the programs a process loads.

use rustc_hash::FxHashMap;
use std::sync::{Mutex, OnceLock, RwLock};

/// An interned identifier.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(u32);

struct Interner {
    map: Mutex<FxHashMap<&'static str, Symbol>>,
    strs: RwLock<Vec<&'static str>>,
}

fn interner() -> &'static Interner {
    static I: OnceLock<Interner> = OnceLock::new();
    I.get_or_init(|| Interner {
        map: Mutex::new(FxHashMap::default()),
        strs: RwLock::new(Vec::new()),
    })
}

impl Symbol {
    /// Interns `s`, returning the same symbol for equal strings.
    pub fn intern(s: &str) -> Symbol {
        let i = interner();
        let mut map = i.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&sym) = map.get(s) {
            return sym;
        }
        // a standard interner: one copy per distinct name, never freed, so `as_str` can hand
        // out `&'static str` without a lock held by the caller
        let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
        let mut strs = i.strs.write().unwrap_or_else(|e| e.into_inner());
        let sym = Symbol(strs.len() as u32);
        strs.push(leaked);
        map.insert(leaked, sym);
        sym
    }
    /// The interned text.
    pub fn as_str(self) -> &'static str {
        interner().strs.read().unwrap_or_else(|e| e.into_inner())[self.0 as usize]
    }
    /// The raw index (stable for the life of the process).
    pub fn as_u32(self) -> u32 {
        self.0
    }
}

impl std::fmt::Debug for Symbol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for Symbol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
