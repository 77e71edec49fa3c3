// Pieces the pages share: status badges, field-level diffs, policy findings, drift, problems.

import { h, show } from "./dom.js";

/** A coloured status word. */
export function badge(status, props = {}) {
  const word = status === undefined || status === null ? "unknown" : String(status);
  return h("span", { class: `badge s-${word.replace(/[^a-z_]/gi, "")}`, ...props }, word.replace(/_/g, " "));
}

/** An error as the server explained it, with the request ID to find it in the logs. */
export function problem(e) {
  const p = (e && e.problem) || {};
  return h(
    "div",
    { class: "problem", role: "alert" },
    h("strong", {}, p.title || "Error"),
    " ",
    e && e.message ? e.message : String(e),
    p.requestId ? h("span", { class: "muted" }, ` (request ${p.requestId})`) : null,
  );
}

export function loading(what) {
  return h("p", { class: "muted loading" }, `Loading ${what}\u2026`);
}

const SIGN = { added: "+", removed: "-", changed: "~" };

/** Field changes `[{path, kind, old, new}]` as a table. */
export function fieldChanges(changes) {
  if (!changes || changes.length === 0) return h("p", { class: "muted" }, "No field changes.");
  return h(
    "table",
    { class: "changes" },
    h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "field"), h("th", {}, "before"), h("th", {}, "after"))),
    h(
      "tbody",
      {},
      changes.map((c) =>
        h(
          "tr",
          { class: `change k-${c.kind}`, "data-path": c.path },
          h("td", { class: "sign" }, SIGN[c.kind] || "?"),
          h("td", { class: "path" }, c.path || "(whole)"),
          h("td", { class: "old" }, show(c.old)),
          h("td", { class: "new" }, show(c.new)),
        ),
      ),
    ),
  );
}

/** A comparison or plan: one block per resource with its field changes. */
export function resourceDiffs(items, label) {
  if (!items || items.length === 0) return h("p", { class: "muted" }, "Nothing differs.");
  return h(
    "div",
    { class: "diffs" },
    items.map((r) =>
      h(
        "div",
        { class: "resource-diff", "data-id": r.id },
        h("h4", {}, badge(label(r)), " ", h("code", {}, r.id), " ", h("span", { class: "muted" }, r.type)),
        fieldChanges(r.changes),
      ),
    ),
  );
}

/** A plan (as the worker records it): its counts and the resources it changes. */
export function planView(plan) {
  if (!plan) return h("p", { class: "muted" }, "Not planned yet.");
  const sum = plan.summary || {};
  const changing = (plan.steps || []).filter((st) => st.action !== "UnChanged");
  return h(
    "div",
    { class: "plan" },
    h(
      "p",
      { class: "counts" },
      ["create", "update", "replace", "delete", "unchanged"].map((k) => h("span", { class: `count c-${k}` }, `${sum[k] || 0} ${k}`)),
    ),
    resourceDiffs(changing, (st) => String(st.action).toLowerCase()),
  );
}

/** Policy findings (the stack's, or an operation's verdict). */
export function findings(report) {
  if (!report || !report.policies || report.policies.length === 0) {
    return h("p", { class: "muted", id: "no-policies" }, "No policy is configured for this stack.");
  }
  const rows = report.findings || [];
  return h(
    "div",
    { class: "findings" },
    h(
      "p",
      {},
      report.blocked ? badge("blocked") : badge("allowed"),
      " ",
      `${report.policies.length} policy plugin(s): ${report.policies.join(", ")}`,
    ),
    rows.length === 0
      ? h("p", { class: "muted" }, "No findings.")
      : h(
          "table",
          { class: "findings-table" },
          h("thead", {}, h("tr", {}, ["severity", "policy", "rule", "resource", "message"].map((t) => h("th", {}, t)))),
          h(
            "tbody",
            {},
            rows.map((f) =>
              h(
                "tr",
                { class: "finding" },
                h("td", {}, badge(f.exempted ? "exempted" : f.severity)),
                h("td", {}, f.policy),
                h("td", {}, f.rule),
                h("td", {}, h("code", {}, f.resourceId || "(spec)")),
                h("td", {}, f.message, f.exempted ? h("span", { class: "muted" }, ` (exempted: ${f.exempted})`) : null),
              ),
            ),
          ),
        ),
    (report.failures || []).map((f) => h("p", { class: "problem" }, `policy ${f.policy} failed: ${f.message}`)),
  );
}

/** A stack's drift report. */
export function drift(report) {
  const rows = report.resources || [];
  if (rows.length === 0) return h("p", { class: "muted" }, "State records no resources yet.");
  return h(
    "table",
    { class: "drift" },
    h("thead", {}, h("tr", {}, h("th", {}, "resource"), h("th", {}, "type"), h("th", {}, "status"), h("th", {}, "recorded \u2192 live"))),
    h(
      "tbody",
      {},
      rows.map((r) =>
        h(
          "tr",
          { "data-id": r.id },
          h("td", {}, h("code", {}, r.id)),
          h("td", {}, r.type),
          h("td", {}, badge(r.status)),
          h("td", {}, r.error ? r.error : r.changes && r.changes.length ? fieldChanges(r.changes) : ""),
        ),
      ),
    ),
  );
}
