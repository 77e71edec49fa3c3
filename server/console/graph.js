// The resource graph as SVG, laid out by DAG layers: a column per layer (the API gives each
// node its layer: one more than its deepest dependency), nodes in a column ordered by where
// their dependencies sit (fewer crossing edges), edges from dependency to dependent.

import { s } from "./dom.js";

const W = 230;
const H = 46;
const GAP_X = 70;
const GAP_Y = 18;
const PAD = 16;

function shorten(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "\u2026" : text;
}

/**
 * `graph`: {nodes: [{id, type, kind, layer}], edges: [{from, to}]}. `states`: a Map from ID to
 * a state name (`running`, `succeeded`, `failed`, `skipped`, `create`, ...) shown as the
 * node's colour. Returns the <svg> element and a function to change a node's state later.
 */
export function drawGraph(graph, states = new Map()) {
  const layers = [];
  for (const node of graph.nodes) {
    (layers[node.layer] ||= []).push(node);
  }
  const row = new Map();
  const deps = new Map();
  for (const e of graph.edges) {
    if (!deps.has(e.to)) deps.set(e.to, []);
    deps.get(e.to).push(e.from);
  }
  layers.forEach((column, layer) => {
    if (!column) return;
    if (layer > 0) {
      const weight = (n) => {
        const rows = (deps.get(n.id) || []).map((d) => row.get(d)).filter((r) => r !== undefined);
        return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : Infinity;
      };
      column.sort((a, b) => weight(a) - weight(b) || a.id.localeCompare(b.id));
    }
    column.forEach((n, i) => row.set(n.id, i));
  });
  const position = new Map();
  for (const node of graph.nodes) {
    position.set(node.id, {
      x: PAD + node.layer * (W + GAP_X),
      y: PAD + row.get(node.id) * (H + GAP_Y),
    });
  }
  const columns = Math.max(1, layers.length);
  const rows = Math.max(1, ...layers.map((c) => (c ? c.length : 0)));
  const width = PAD * 2 + columns * W + (columns - 1) * GAP_X;
  const height = PAD * 2 + rows * H + (rows - 1) * GAP_Y;

  const defs = s(
    "defs",
    {},
    s(
      "marker",
      { id: "arrow", viewBox: "0 0 10 10", refX: "10", refY: "5", markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" },
      s("path", { d: "M 0 0 L 10 5 L 0 10 z", class: "arrowhead" }),
    ),
  );
  const edges = graph.edges.map((e) => {
    const a = position.get(e.from);
    const b = position.get(e.to);
    if (!a || !b) return null;
    const x1 = a.x + W;
    const y1 = a.y + H / 2;
    const x2 = b.x;
    const y2 = b.y + H / 2;
    const mid = (x1 + x2) / 2;
    return s(
      "path",
      { class: "edge", d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}`, "marker-end": "url(#arrow)", "data-from": e.from, "data-to": e.to },
      s("title", {}, `${e.from} \u2192 ${e.to}`),
    );
  });
  const nodes = new Map();
  const drawn = graph.nodes.map((n) => {
    const p = position.get(n.id);
    const g = s(
      "g",
      { class: "node", "data-id": n.id, "data-state": states.get(n.id) || "", transform: `translate(${p.x} ${p.y})` },
      s("title", {}, `${n.id} (${n.type})`),
      s("rect", { width: W, height: H, rx: "6", ry: "6" }),
      s("text", { x: "10", y: "17", class: "kind" }, shorten(n.kind === n.type ? n.kind : `${n.kind} \u00b7 ${n.type}`, 34)),
      s("text", { x: "10", y: "35", class: "name" }, shorten(n.id, 30)),
    );
    nodes.set(n.id, g);
    return g;
  });
  const svg = s(
    "svg",
    { class: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": `resource graph: ${graph.nodes.length} resources` },
    defs,
    s("g", { class: "edges" }, edges),
    s("g", { class: "nodes" }, drawn),
  );
  const setState = (id, state) => {
    const g = nodes.get(id);
    if (g) g.setAttribute("data-state", state);
  };
  return { svg, setState };
}
