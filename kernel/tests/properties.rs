//! Property tests for the DAG and the diff.

use std::collections::{HashMap, HashSet};

use kusion_kernel::diff::{self, ChangeKind};
use kusion_kernel::graph::{Dag, GraphError};
use proptest::prelude::*;
use serde_json::{Map, Value};

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("r{i}")).collect()
}

fn reachable(n: usize, edges: &[(usize, usize)]) -> Vec<HashSet<usize>> {
    let mut out = vec![HashSet::new(); n];
    let mut adj = vec![Vec::new(); n];
    for &(a, b) in edges {
        adj[a].push(b);
    }
    for (start, reach) in out.iter_mut().enumerate() {
        let mut stack = adj[start].clone();
        while let Some(x) = stack.pop() {
            if reach.insert(x) {
                stack.extend(adj[x].iter().copied());
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn order_respects_every_edge_and_reduction_keeps_reachability(
        n in 1usize..40,
        raw in proptest::collection::vec((0usize..40, 0usize..40), 0..120),
    ) {
        // Edges from lower to higher index are always acyclic.
        let edges: Vec<(usize, usize)> = raw.into_iter().map(|(a, b)| (a % n, b % n)).filter(|(a, b)| a < b).collect();
        let dag = Dag::from_edges(ids(n), edges.clone()).unwrap();
        let position: HashMap<&str, usize> = dag.order().enumerate().map(|(i, id)| (id, i)).collect();
        prop_assert_eq!(position.len(), n);
        for &(a, b) in &edges {
            let (pa, pb) = (position[format!("r{}", a).as_str()], position[format!("r{}", b).as_str()]);
            prop_assert!(pa < pb);
        }
        let reduced: Vec<(usize, usize)> = dag
            .edges()
            .iter()
            .map(|(a, b)| (a[1..].parse().unwrap(), b[1..].parse().unwrap()))
            .collect();
        prop_assert_eq!(reachable(n, &edges), reachable(n, &reduced));
        // Minimal: no reduced edge is implied by the others.
        for (i, e) in reduced.iter().enumerate() {
            let others: Vec<(usize, usize)> = reduced.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, e)| *e).collect();
            prop_assert!(!reachable(n, &others)[e.0].contains(&e.1), "edge {:?} is redundant", e);
        }
    }

    #[test]
    fn cycles_are_found_and_printed(
        n in 2usize..30,
        raw in proptest::collection::vec((0usize..30, 0usize..30), 1..60),
        back in (0usize..30, 0usize..30),
    ) {
        let mut edges: Vec<(usize, usize)> = raw.into_iter().map(|(a, b)| (a % n, b % n)).filter(|(a, b)| a < b).collect();
        let (x, y) = (back.0 % n, back.1 % n);
        let (lo, hi) = (x.min(y), x.max(y));
        // Make sure lo reaches hi, then close the loop with hi -> lo.
        edges.push((lo, hi.max(lo + 1).min(n - 1)));
        let hi = hi.max(lo + 1).min(n - 1);
        edges.push((hi, lo));
        let err = Dag::from_edges(ids(n), edges.clone()).unwrap_err();
        let GraphError::Cycle { cycle } = err else { panic!("expected a cycle") };
        prop_assert!(cycle.len() >= 2);
        prop_assert_eq!(cycle.first(), cycle.last());
        let set: HashSet<(String, String)> = edges.iter().map(|(a, b)| (format!("r{a}"), format!("r{b}"))).collect();
        for w in cycle.windows(2) {
            prop_assert!(set.contains(&(w[0].clone(), w[1].clone())), "{:?} is not an edge", w);
        }
    }

    #[test]
    fn diff_of_equal_values_is_empty(v in json_value(3)) {
        prop_assert!(diff::diff(&v, &v).is_empty());
    }

    #[test]
    fn applying_a_diff_turns_old_into_new(a in json_object(3), b in json_object(3)) {
        let changes = diff::diff(&a, &b);
        let mut patched = a.clone();
        for c in changes.iter().filter(|c| c.kind != ChangeKind::Removed) {
            prop_assert!(diff::set_path_or_push(&mut patched, &c.path, c.new.clone().unwrap()));
        }
        for c in changes.iter().rev().filter(|c| c.kind == ChangeKind::Removed) {
            prop_assert!(c.path.remove(&mut patched).is_some());
        }
        prop_assert_eq!(patched, b);
    }
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..5).prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::String),
    ]
}

fn json_value(depth: u32) -> impl Strategy<Value = Value> {
    leaf().prop_recursive(depth, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-d]", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn json_object(depth: u32) -> impl Strategy<Value = Value> {
    proptest::collection::btree_map("[a-d]", json_value(depth), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}
