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

/** A day-2 run's plan: each operation's batches per cluster, with what each target would get. */
export function runPlanView(plan) {
  if (!plan) return h("p", { class: "muted" }, "Not checked yet.");
  const ops = plan.operations || [];
  const unresolved = plan.unresolved || [];
  return h(
    "div",
    { class: "plan run-plan" },
    ops.map((op) =>
      h(
        "div",
        { class: "run-operation", "data-name": op.name },
        h("h4", {}, `${op.kind} ${op.name}`, " ", h("span", { class: "muted" }, `app ${op.app}, batch size ${op.batchSize}`)),
        (op.clusters || []).map((c) =>
          (c.batches || []).map((batch, i) =>
            h(
              "div",
              { class: "run-batch" },
              h("p", {}, `cluster ${c.cluster} batch ${i + 1}/${c.batches.length}`),
              h(
                "ul",
                {},
                batch.map((t) => h("li", {}, h("code", {}, t.target), t.error ? [" ", badge("failed"), ` ${t.error}`] : ` — ${t.action || ""}`)),
              ),
            ),
          ),
        ),
      ),
    ),
    unresolved.length
      ? h("div", { class: "unresolved" }, h("p", {}, badge("failed"), " Unresolved (not part of the run):"), h("ul", {}, unresolved.map((u) => h("li", {}, `${u.subject}: ${u.reason}`))))
      : null,
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
