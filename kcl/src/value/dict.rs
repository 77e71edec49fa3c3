//! A dict value: its entries in insertion order and the operators (`=`, `+=`) they were
//! written with, which merges and schemas read.

use std::rc::Rc;

use rustc_hash::{FxBuildHasher, FxHashMap};

use super::{ConfigOp, Map, Str, Value};

/// A dict value: entries in insertion order plus the operator each entry was written with
/// (only recorded when not `:`, so plain data pays nothing: a dict without any costs one null
/// pointer). The operators are shared, so a schema instance keeps its config's operators
/// without a copy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dict {
    pub map: Map,
    pub ops: Option<Rc<Ops>>,
}

/// The non-`:` operators of a dict's entries. Most configs have a handful, kept in a small
/// vector (a hash table costs ~150 bytes even for one entry); many switch to a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Ops {
    Few(Vec<(Str, (ConfigOp, Option<i64>))>),
    Many(FxHashMap<Str, (ConfigOp, Option<i64>)>),
}

/// Entries up to which [`Ops`] stays a vector.
const FEW_OPS: usize = 16;

impl Ops {
    fn get(&self, k: &str) -> Option<(ConfigOp, Option<i64>)> {
        match self {
            Ops::Few(v) => v.iter().find(|(x, _)| &**x == k).map(|(_, o)| *o),
            Ops::Many(m) => m.get(k).copied(),
        }
    }
    /// [`Self::get`] for a key held as a `Str`: the keys here mostly share its handle (or
    /// are short, inline ones), so comparing handles spares comparing texts.
    fn get_key(&self, k: &Str) -> Option<(ConfigOp, Option<i64>)> {
        match self {
            Ops::Few(v) => v.iter().find(|(x, _)| x == k).map(|(_, o)| *o),
            Ops::Many(m) => m.get(k.as_str()).copied(),
        }
    }
    /// Drop growth slack (for operators kept long).
    pub fn shrink_to_fit(&mut self) {
        match self {
            Ops::Few(v) => v.shrink_to_fit(),
            Ops::Many(m) => m.shrink_to_fit(),
        }
    }
    /// Whether some entry was written with `+=`.
    pub fn any_insert(&self) -> bool {
        match self {
            Ops::Few(v) => v.iter().any(|(_, (o, _))| *o == ConfigOp::Insert),
            Ops::Many(m) => m.values().any(|(o, _)| *o == ConfigOp::Insert),
        }
    }
    /// Every `+=` entry recorded as `=` (its items already added to the value).
    pub fn inserts_as_overrides(&mut self) {
        let fix = |o: &mut (ConfigOp, Option<i64>)| {
            if o.0 == ConfigOp::Insert {
                *o = (ConfigOp::Override, None);
            }
        };
        match self {
            Ops::Few(v) => v.iter_mut().for_each(|(_, o)| fix(o)),
            Ops::Many(m) => m.values_mut().for_each(fix),
        }
    }
    /// Whether every entry was written with `=` (no index).
    pub fn all_override(&self) -> bool {
        match self {
            Ops::Few(v) => v.iter().all(|(_, o)| *o == (ConfigOp::Override, None)),
            Ops::Many(m) => m.values().all(|o| *o == (ConfigOp::Override, None)),
        }
    }
    /// Whether every key with an operator is one of `map`'s keys.
    pub fn keys_within(&self, map: &Map) -> bool {
        match self {
            Ops::Few(v) => v.iter().all(|(k, _)| map.contains_key(k)),
            Ops::Many(m) => m.keys().all(|k| map.contains_key(k)),
        }
    }
    fn remove(&mut self, k: &str) {
        match self {
            Ops::Few(v) => v.retain(|(x, _)| &**x != k),
            Ops::Many(m) => {
                m.remove(k);
            }
        }
    }
    fn insert(&mut self, k: Str, o: (ConfigOp, Option<i64>)) {
        match self {
            Ops::Few(v) => {
                if let Some(slot) = v.iter_mut().find(|(x, _)| *x == k) {
                    slot.1 = o;
                } else if v.len() < FEW_OPS {
                    v.push((k, o));
                } else {
                    let mut m: FxHashMap<Str, (ConfigOp, Option<i64>)> =
                        std::mem::take(v).into_iter().collect();
                    m.insert(k, o);
                    *self = Ops::Many(m);
                }
            }
            Ops::Many(m) => {
                m.insert(k, o);
            }
        }
    }
}

impl Dict {
    pub fn new() -> Self {
        Dict::default()
    }
    pub fn with_capacity(n: usize) -> Self {
        Dict {
            map: Map::with_capacity_and_hasher(n, FxBuildHasher),
            ops: None,
        }
    }
    pub fn get(&self, k: &str) -> Option<&Value> {
        self.map.get(k)
    }
    pub fn insert(&mut self, k: Str, v: Value) {
        self.map.insert(k, v);
    }
    pub fn op_of(&self, k: &str) -> (ConfigOp, Option<i64>) {
        self.ops
            .as_ref()
            .and_then(|o| o.get(k))
            .unwrap_or((ConfigOp::Union, None))
    }
    /// [`Self::op_of`] for a key held as a `Str` (one of a map's keys, say).
    pub fn op_of_key(&self, k: &Str) -> (ConfigOp, Option<i64>) {
        self.ops
            .as_ref()
            .and_then(|o| o.get_key(k))
            .unwrap_or((ConfigOp::Union, None))
    }
    pub fn set_op(&mut self, k: Str, op: ConfigOp, index: Option<i64>) {
        if op == ConfigOp::Union && index.is_none() {
            if let Some(o) = &mut self.ops
                && o.get_key(&k).is_some()
            {
                Rc::make_mut(o).remove(&k);
            }
            return;
        }
        if let Some(o) = &self.ops
            && o.get_key(&k) == Some((op, index))
        {
            return;
        }
        Rc::make_mut(
            self.ops
                .get_or_insert_with(|| Rc::new(Ops::Few(Vec::with_capacity(1)))),
        )
        .insert(k, (op, index));
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
