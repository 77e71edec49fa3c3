// Builds the page from data without ever parsing markup: text goes in as text nodes and
// attributes through setAttribute, so nothing a stack, a release or an error says can become
// HTML or script.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "style") {
      // The Content-Security-Policy refuses inline styles: use a class.
      throw new Error("inline style attributes are not allowed");
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** An HTML element: h("a", {href: "#/"}, "text", child, [more]). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** An SVG element, built the same way. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** Replaces el's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Milliseconds since the epoch or an RFC 3339 string, as `YYYY-MM-DD HH:MM:SS` UTC. */
export function when(t) {
  if (t === undefined || t === null || t === "") return "";
  const d = new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  return d.toISOString().replace("T", " ").slice(0, 19);
}

/** A JSON value as one short line. */
export function show(v) {
  if (v === undefined) return "";
  const text = JSON.stringify(v);
  return text.length > 200 ? text.slice(0, 197) + "..." : text;
}
