//! The dependency DAG of a spec: explicit `dependsOn` plus implicit `$kusion_path` edges.
//!
//! Edges point from a dependency to its dependent (`namespace -> deployment`): a topological
//! order is a valid creation order, and the reverse a valid deletion order.

use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::sync::OnceLock;

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::reference::{Reference, ReferenceError, references_of};
use crate::spec::Spec;

/// Why the dependency graph cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// The dependencies form a cycle.
    #[error("dependency cycle: {}", .cycle.join(" -> "))]
    Cycle {
        /// The resources around the cycle.
        cycle: Vec<String>,
    },
    /// A reference between resources is invalid.
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    /// `dependsOn` names a resource the spec does not have.
    #[error("resource {id:?}: dependsOn names {dependency:?}, which is not in the spec")]
    MissingDependency {
        /// The resource.
        id: String,
        /// The ID it names.
        dependency: String,
    },
    #[error(
        "resource {key:?} refers to {reference:?}, which the spec holds for several targets ({candidates:?}) and none is its own"
    )]
    /// A bare ID names a resource the spec holds in several targets.
    AmbiguousReference {
        /// The resource referring.
        key: String,
        /// The ID it names.
        reference: String,
        /// The state keys it could mean.
        candidates: Vec<String>,
    },
}

/// Finds resources by ID when one ID may occur once per target (`id@target` state keys).
///
/// A dependency or reference by bare ID names the resource with that ID in the same target as
/// the dependent, else the only resource with that ID. Resources with one ID are chained
/// (`first` + `next`) so the common case, one resource per ID, costs one hash lookup and no
/// allocation per resource.
pub struct KeyIndex<'a> {
    first: FxHashMap<&'a str, u32>,
    next: Vec<u32>,
    targets: Vec<Option<&'a str>>,
}

const END: u32 = u32::MAX;

impl crate::reference::KnownIds for KeyIndex<'_> {
    fn has(&self, id: &str) -> bool {
        self.contains(id)
    }
}

/// Which resources a bare ID names, seen from one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// No resource has the ID.
    None,
    /// Exactly one (its index).
    One(usize),
    /// Several targets hold the ID and none is the asker's.
    Many(Vec<usize>),
}

impl<'a> KeyIndex<'a> {
    /// Index `(id, target)` pairs by position.
    pub fn new(items: impl ExactSizeIterator<Item = (&'a str, Option<&'a str>)>) -> KeyIndex<'a> {
        let mut index = KeyIndex {
            first: FxHashMap::with_capacity_and_hasher(items.len(), Default::default()),
            next: Vec::with_capacity(items.len()),
            targets: Vec::with_capacity(items.len()),
        };
        for (i, (id, target)) in items.enumerate() {
            let previous = index.first.insert(id, i as u32).unwrap_or(END);
            index.next.push(previous);
            index.targets.push(target);
        }
        index
    }

    /// Whether some resource has the ID.
    pub fn contains(&self, id: &str) -> bool {
        self.first.contains_key(id)
    }

    fn chain(&self, id: &str) -> impl Iterator<Item = usize> + '_ {
        let mut at = self.first.get(id).copied().unwrap_or(END);
        std::iter::from_fn(move || {
            (at != END).then(|| {
                let here = at as usize;
                at = self.next[here];
                here
            })
        })
    }

    /// The resource `id` names for a resource in `target`.
    pub fn pick(&self, id: &str, target: Option<&str>) -> Pick {
        let mut all = self.chain(id);
        let Some(first) = all.next() else {
            return Pick::None;
        };
        let Some(second) = all.next() else {
            return Pick::One(first);
        };
        let mut candidates = vec![first, second];
        candidates.extend(all);
        match candidates.iter().find(|&&i| self.targets[i] == target) {
            Some(&i) => Pick::One(i),
            None => {
                candidates.sort_unstable();
                Pick::Many(candidates)
            }
        }
    }
}

/// A graph with the by-products of building it (see [`Dag::build_parts`]).
pub(crate) struct Built<'a> {
    pub dag: Dag,
    pub index: KeyIndex<'a>,
    /// `references[i]`: the `$kusion_path` references of resource `i`.
    pub references: Vec<Vec<Reference>>,
    /// `referenced[i]`: some resource's `$kusion_path` names resource `i`.
    pub referenced: Vec<bool>,
}

/// A validated, acyclic dependency graph over resource IDs.
#[derive(Debug, Clone)]
pub struct Dag {
    graph: DiGraph<String, ()>,
    /// Node by name, built on the first look-up by name (planning never needs it).
    index: OnceLock<FxHashMap<String, NodeIndex>>,
    /// Node indices in a topological order (dependencies first).
    order: Vec<NodeIndex>,
}

/// The ID of the Namespace a namespaced Kubernetes object lives in
/// (`apiVersion:Kind:namespace:name` -> `v1:Namespace:namespace`): an implicit dependency when
/// the spec holds that Namespace, so the object is created after it and deleted before it
/// (the API server refuses objects in a namespace it does not have yet).
pub(crate) fn namespace_of(resource: &kusion_sdk::Resource) -> Option<String> {
    if resource.resource_type != "Kubernetes" {
        return None;
    }
    let mut parts = resource.id.split(':');
    let (_, _, namespace, _) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !namespace.is_empty()).then(|| format!("v1:Namespace:{namespace}"))
}

impl Dag {
    /// Build the graph of a spec from `dependsOn` and implicit references, reject cycles and
    /// remove edges implied by others. Nodes are named by resource ID.
    pub fn build(spec: &Spec) -> Result<Dag, GraphError> {
        Dag::build_targeted(spec, &[])
    }

    /// [`Dag::build`] for a spec whose resources live in targets (`targets[i]` for resource
    /// `i`; an empty slice means none): nodes are named by state key (`id@target`), node `i` is
    /// resource `i`, and a bare ID names the resource in the dependent's own target first (see
    /// [`KeyIndex`]). A `dependsOn` naming an ID held by several other targets depends on all.
    pub fn build_targeted(spec: &Spec, targets: &[Option<String>]) -> Result<Dag, GraphError> {
        Ok(Dag::build_parts(spec, targets)?.dag)
    }

    /// [`Dag::build_targeted`], also handing back what it found on the way: the index of
    /// resources by ID and target, and each resource's references (the planner reuses both
    /// rather than scanning every string again).
    pub(crate) fn build_parts<'a>(
        spec: &'a Spec,
        targets: &'a [Option<String>],
    ) -> Result<Built<'a>, GraphError> {
        let target = |i: usize| targets.get(i).and_then(|t| t.as_deref());
        let index = KeyIndex::new(
            spec.resources
                .iter()
                .enumerate()
                .map(|(i, r)| (r.id.as_str(), target(i))),
        );
        let mut edges = Vec::new();
        let mut references = Vec::with_capacity(spec.resources.len());
        let mut referenced = vec![false; spec.resources.len()];
        let key = |i: usize| crate::state::state_key(&spec.resources[i].id, target(i));
        let scanned = crate::par::map(&spec.resources, |r| references_of(r, &index));
        for (i, (resource, found)) in spec.resources.iter().zip(scanned).enumerate() {
            for dependency in &resource.depends_on {
                match index.pick(dependency, target(i)) {
                    Pick::One(from) => edges.push((from, i)),
                    Pick::Many(all) => edges.extend(all.into_iter().map(|from| (from, i))),
                    Pick::None => {
                        return Err(GraphError::MissingDependency {
                            id: key(i),
                            dependency: dependency.clone(),
                        });
                    }
                }
            }
            if let Some(namespace) = namespace_of(resource) {
                match index.pick(&namespace, target(i)) {
                    Pick::One(from) => edges.push((from, i)),
                    Pick::Many(all) => edges.extend(all.into_iter().map(|from| (from, i))),
                    Pick::None => {}
                }
            }
            let found = found?;
            for reference in &found {
                match index.pick(&reference.id, target(i)) {
                    Pick::One(from) => {
                        edges.push((from, i));
                        referenced[from] = true;
                    }
                    Pick::Many(all) => {
                        return Err(GraphError::AmbiguousReference {
                            key: key(i),
                            reference: reference.id.clone(),
                            candidates: all.into_iter().map(key).collect(),
                        });
                    }
                    // references_of only reports IDs the index knows.
                    Pick::None => {}
                }
            }
            references.push(found);
        }
        let names = (0..spec.resources.len()).map(key).collect();
        Ok(Built {
            dag: Dag::from_edges(names, edges)?,
            index,
            references,
            referenced,
        })
    }

    /// Build from node names and `(dependency, dependent)` index pairs.
    pub fn from_edges(ids: Vec<String>, edges: Vec<(usize, usize)>) -> Result<Dag, GraphError> {
        let mut graph = DiGraph::with_capacity(ids.len(), edges.len());
        for id in ids {
            graph.add_node(id);
        }
        let mut seen = FxHashSet::with_capacity_and_hasher(edges.len(), Default::default());
        for (from, to) in edges {
            if seen.insert((from, to)) {
                graph.add_edge(NodeIndex::new(from), NodeIndex::new(to), ());
            }
        }
        let order = match petgraph::algo::toposort(&graph, None) {
            Ok(order) => order,
            Err(cycle) => {
                return Err(GraphError::Cycle {
                    cycle: find_cycle(&graph, cycle.node_id()),
                });
            }
        };
        let mut dag = Dag {
            graph,
            index: OnceLock::new(),
            order,
        };
        dag.reduce();
        Ok(dag)
    }

    /// Transitive reduction: drop `p -> v` when `p` already reaches `v` through another
    /// dependency of `v`. Only nodes with several dependencies are examined, and each backward
    /// search stops below the earliest dependency in topological order, so sparse specs reduce
    /// in near-linear time without materialising the closure.
    fn reduce(&mut self) {
        let n = self.graph.node_count();
        let mut rank = vec![0usize; n];
        for (r, node) in self.order.iter().enumerate() {
            rank[node.index()] = r;
        }
        let mut redundant = Vec::new();
        let mut visited = vec![u32::MAX; n];
        let mut stack = Vec::new();
        for (stamp, v) in self.order.iter().enumerate() {
            let preds: Vec<NodeIndex> = self
                .graph
                .neighbors_directed(*v, Direction::Incoming)
                .collect();
            if preds.len() < 2 {
                continue;
            }
            let floor = preds.iter().map(|p| rank[p.index()]).min().unwrap_or(0);
            // Most nodes have a handful of dependencies: a scan beats hashing them.
            let pred_set: Option<FxHashSet<NodeIndex>> =
                (preds.len() > 16).then(|| preds.iter().copied().collect());
            let is_pred = |a: NodeIndex| match &pred_set {
                Some(set) => set.contains(&a),
                None => preds.contains(&a),
            };
            // Each ancestor is visited once per node (the stamp), so no duplicates here.
            let mut reached: Vec<NodeIndex> = Vec::new();
            // Walk the ancestors of every direct dependency; any direct dependency met on the
            // way is implied.
            for q in &preds {
                stack.clear();
                stack.extend(self.graph.neighbors_directed(*q, Direction::Incoming));
                while let Some(a) = stack.pop() {
                    if visited[a.index()] == stamp as u32 || rank[a.index()] < floor {
                        continue;
                    }
                    visited[a.index()] = stamp as u32;
                    if is_pred(a) {
                        reached.push(a);
                    }
                    stack.extend(self.graph.neighbors_directed(a, Direction::Incoming));
                }
            }
            for p in reached {
                if let Some(edge) = self.graph.find_edge(p, *v) {
                    redundant.push(edge);
                }
            }
        }
        // Removing edges swaps indices; remove highest first so earlier indices stay valid.
        redundant.sort_unstable_by_key(|e| std::cmp::Reverse(e.index()));
        for edge in redundant {
            self.graph.remove_edge(edge);
        }
    }

    fn node_index(&self) -> &FxHashMap<String, NodeIndex> {
        self.index.get_or_init(|| {
            self.graph
                .node_indices()
                .map(|n| (self.graph[n].clone(), n))
                .collect()
        })
    }

    /// How many resources.
    pub fn len(&self) -> usize {
        self.graph.node_count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.graph.node_count() == 0
    }

    /// How many dependency edges.
    pub fn edge_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// IDs in a valid creation order.
    pub fn order(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(|n| self.graph[*n].as_str())
    }

    /// Direct (reduced) dependencies of node `i` (resource `i` of the spec it was built from),
    /// as node indices.
    pub fn dependency_indices(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        self.graph
            .neighbors_directed(NodeIndex::new(i), Direction::Incoming)
            .map(|n| n.index())
    }

    /// Direct (reduced) dependencies of `id`.
    pub fn dependencies(&self, id: &str) -> Vec<&str> {
        self.neighbors(id, Direction::Incoming)
    }

    /// Direct (reduced) dependents of `id`.
    pub fn dependents(&self, id: &str) -> Vec<&str> {
        self.neighbors(id, Direction::Outgoing)
    }

    fn neighbors(&self, id: &str, direction: Direction) -> Vec<&str> {
        let Some(n) = self.node_index().get(id) else {
            return Vec::new();
        };
        let mut out: Vec<&str> = self
            .graph
            .neighbors_directed(*n, direction)
            .map(|m| self.graph[m].as_str())
            .collect();
        out.sort_unstable();
        out
    }

    /// Whether the graph has the resource.
    pub fn contains(&self, id: &str) -> bool {
        self.node_index().contains_key(id)
    }

    /// `(dependency, dependent)` pairs of the reduced graph.
    pub fn edges(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = self
            .graph
            .edge_indices()
            .filter_map(|e| self.graph.edge_endpoints(e))
            .map(|(a, b)| (self.graph[a].as_str(), self.graph[b].as_str()))
            .collect();
        out.sort_unstable();
        out
    }

    /// One line per resource in creation order, with its direct dependencies.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for id in self.order() {
            let deps = self.dependencies(id);
            if deps.is_empty() {
                let _ = writeln!(out, "{id}");
            } else {
                let _ = writeln!(out, "{id}");
                for d in deps {
                    let _ = writeln!(out, "  <- {d}");
                }
            }
        }
        out
    }

    /// Graphviz `dot`; edges point from a dependency to its dependent.
    pub fn to_dot(&self) -> String {
        let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let mut out = String::from("digraph kusion {\n  rankdir=LR;\n  node [shape=box];\n");
        for id in self.order() {
            let _ = writeln!(out, "  {};", quote(id));
        }
        for (from, to) in self.edges() {
            let _ = writeln!(out, "  {} -> {};", quote(from), quote(to));
        }
        out.push_str("}\n");
        out
    }
}

/// A cycle through `start` (which toposort reported as part of one), as IDs, closed.
fn find_cycle(graph: &DiGraph<String, ()>, start: NodeIndex) -> Vec<String> {
    // Restrict the search to start's strongly connected component.
    let scc = petgraph::algo::tarjan_scc(graph)
        .into_iter()
        .find(|c| c.contains(&start))
        .unwrap_or_else(|| vec![start]);
    let members: HashSet<NodeIndex> = scc.iter().copied().collect();
    // BFS from start's successors back to start gives a shortest cycle.
    let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
    let mut queue = std::collections::VecDeque::new();
    for next in graph.neighbors(start) {
        if members.contains(&next) && !parent.contains_key(&next) {
            parent.insert(next, start);
            queue.push_back(next);
        }
    }
    while let Some(n) = queue.pop_front() {
        if n == start {
            break;
        }
        for next in graph.neighbors(n) {
            if members.contains(&next) && !parent.contains_key(&next) {
                parent.insert(next, n);
                queue.push_back(next);
            }
        }
    }
    let mut path = vec![start];
    let mut at = start;
    while let Some(p) = parent.get(&at) {
        if *p == start {
            break;
        }
        path.push(*p);
        at = *p;
        if path.len() > members.len() + 1 {
            break;
        }
    }
    // `path` walks backwards from start; reverse it into dependency order and close the loop.
    path.reverse();
    let mut names: Vec<String> = path.iter().map(|n| graph[*n].clone()).collect();
    names.push(graph[path[0]].clone());
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(n: usize, edges: &[(usize, usize)]) -> Result<Dag, GraphError> {
        Dag::from_edges((0..n).map(|i| format!("r{i}")).collect(), edges.to_vec())
    }

    #[test]
    fn reduces_implied_edges() {
        let d = dag(3, &[(0, 1), (1, 2), (0, 2)]).unwrap();
        assert_eq!(d.edges(), vec![("r0", "r1"), ("r1", "r2")]);
        assert_eq!(d.order().collect::<Vec<_>>(), vec!["r0", "r1", "r2"]);
    }

    #[test]
    fn reduces_a_node_with_many_dependencies() {
        // A chain r0 -> ... -> r39, and r40 depending on every link: only r39 -> r40 stays
        // (more than 16 dependencies take the hashed membership test).
        let mut edges: Vec<(usize, usize)> = (0..39).map(|i| (i, i + 1)).collect();
        edges.extend((0..40).map(|i| (i, 40)));
        let d = dag(41, &edges).unwrap();
        assert_eq!(d.edge_count(), 40);
        assert_eq!(d.dependencies("r40"), vec!["r39"]);
    }

    #[test]
    fn cycle_is_printed() {
        let e = dag(4, &[(0, 1), (1, 2), (2, 3), (3, 1)]).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("dependency cycle: "), "{text}");
        let GraphError::Cycle { cycle } = e else {
            panic!()
        };
        assert_eq!(cycle.len(), 4, "{cycle:?}");
        assert_eq!(cycle.first(), cycle.last());
        for w in cycle.windows(2) {
            let pair = (w[0].as_str(), w[1].as_str());
            assert!(
                [("r1", "r2"), ("r2", "r3"), ("r3", "r1")].contains(&pair),
                "{pair:?}"
            );
        }
        let e = dag(1, &[(0, 0)]).unwrap_err();
        assert_eq!(e.to_string(), "dependency cycle: r0 -> r0");
    }

    #[test]
    fn namespaced_kubernetes_objects_follow_their_namespace() {
        let spec = Spec::parse(
            "resources:\n\
             - {id: v1:ConfigMap:shop:settings, type: Kubernetes}\n\
             - {id: apps/v1:Deployment:shop:web, type: Kubernetes}\n\
             - {id: v1:Namespace:shop, type: Kubernetes}\n\
             - {id: v1:ConfigMap:other:x, type: Kubernetes}\n\
             - {id: 'hashicorp:aws:aws_s3_bucket:shop', type: Terraform}\n",
            "spec.yaml",
        )
        .unwrap();
        let d = Dag::build(&spec).unwrap();
        assert_eq!(
            d.dependencies("v1:ConfigMap:shop:settings"),
            vec!["v1:Namespace:shop"]
        );
        assert_eq!(
            d.dependencies("apps/v1:Deployment:shop:web"),
            vec!["v1:Namespace:shop"]
        );
        // A namespace the spec does not hold, and other runtimes' IDs, add nothing.
        assert!(d.dependencies("v1:ConfigMap:other:x").is_empty());
        assert!(
            d.dependencies("hashicorp:aws:aws_s3_bucket:shop")
                .is_empty()
        );
    }

    #[test]
    fn dot_output() {
        let d = dag(2, &[(0, 1)]).unwrap();
        assert!(d.to_dot().contains("\"r0\" -> \"r1\";"));
        assert_eq!(d.to_text(), "r0\nr1\n  <- r0\n");
    }
}
