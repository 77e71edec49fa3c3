// The console's pages, routed by the URL's fragment (#/...): everything is drawn from the
// authenticated API.

import { api, ApiError, onUnauthorized, seg, session, stackPath, streamEvents } from "./api.js";
import { fill, h, when } from "./dom.js";
import { drawGraph } from "./graph.js";
import { badge, drift, findings, loading, planView, problem, resourceDiffs, runPlanView } from "./views.js";

const main = document.getElementById("main");
let page = new AbortController();

const ROLES = ["viewer", "operator", "approver", "admin"];
/** The signed-in caller (GET /api/v1/session), or null. */
let me = null;

/** The caller's role on `project`: its own scope or `*`, whichever is higher. */
function roleOn(project) {
  const scopes = (me && me.scopes) || {};
  const rank = (r) => ROLES.indexOf(r);
  const own = scopes[project];
  const all = scopes["*"];
  return rank(own) >= rank(all) ? own : all;
}

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

const stackHash = (p, s) => `#/stacks/${seg(p)}/${seg(s)}`;

function section(title, id, ...body) {
  return h("section", { class: "card", id }, h("h2", {}, title), ...body);
}

/** Runs `load` and puts what it draws (or the error) into `el`. */
async function into(el, what, load) {
  fill(el, loading(what));
  try {
    fill(el, await load());
  } catch (e) {
    if (page.signal.aborted) return;
    fill(el, problem(e));
  }
}

// --- sign in --------------------------------------------------------------------------------

function signIn(next, message) {
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off", placeholder: "kusion_...", required: true, size: 70 });
  const status = h("div", { id: "signin-status" }, message ? problem(new Error(message)) : null);
  const form = h(
    "form",
    {
      class: "card signin",
      id: "signin",
      onsubmit: async (event) => {
        event.preventDefault();
        session.set(input.value.trim());
        try {
          await api("/api/v1/session");
          await showWho();
          go(next && next !== "#/signin" ? next : "#/");
        } catch (e) {
          session.clear();
          fill(status, problem(e));
        }
      },
    },
    h("h2", {}, "Sign in"),
    h("p", {}, "Paste an API token: the one ", h("code", {}, "kusionctl server"), " printed at start, or one an admin minted for you. It is kept in this tab only."),
    h("p", {}, input, " ", h("button", { type: "submit", id: "signin-button" }, "Sign in")),
    status,
  );
  fill(main, form);
  input.focus();
}

async function showWho() {
  const who = document.getElementById("who");
  const out = document.getElementById("signout");
  me = null;
  if (!session.token) {
    fill(who);
    out.hidden = true;
    return;
  }
  try {
    me = await api("/api/v1/session");
    const scopes = Object.entries(me.scopes || {}).map(([p, r]) => `${r} on ${p}`).join(", ");
    fill(who, "signed in as ", h("strong", { id: "subject" }, me.subject), h("span", { class: "muted" }, ` (${scopes})`));
    out.hidden = false;
  } catch {
    fill(who);
  }
}

// --- stacks ---------------------------------------------------------------------------------

async function stacksPage() {
  const body = h("tbody", {});
  fill(
    main,
    h("h1", {}, "Stacks"),
    section(
      "Stacks of the checkout",
      "stacks",
      h(
        "table",
        { class: "stacks" },
        h("thead", {}, h("tr", {}, ["project", "stack", "description", "last release", "drift"].map((t) => h("th", {}, t)))),
        body,
      ),
    ),
  );
  const projects = await api("/api/v1/projects", { signal: page.signal });
  const all = projects.flatMap((p) => p.stacks);
  const drifts = [];
  if (all.length === 0) fill(body, h("tr", {}, h("td", { colspan: 5, class: "muted" }, "No stacks you may view.")));
  for (const st of all) {
    const release = h("td", { class: "last-release" }, "\u2026");
    const driftCell = h("td", { class: "drift-status" }, "\u2026");
    body.append(
      h(
        "tr",
        { class: "stack-row", "data-stack": `${st.project}/${st.stack}` },
        h("td", {}, st.project),
        h("td", {}, h("a", { href: stackHash(st.project, st.stack), class: "stack-link" }, st.stack)),
        h("td", {}, st.description || "", st.requireApproval ? h("span", { class: "tag" }, "approval required") : null),
        release,
        driftCell,
      ),
    );
    api(`${stackPath(st.project, st.stack)}/releases`, { signal: page.signal })
      .then((rs) => {
        const last = rs[rs.length - 1];
        fill(
          release,
          last
            ? [h("a", { href: `${stackHash(st.project, st.stack)}/releases/${last.revision}` }, `#${last.revision}`), " ", last.operation, " ", badge(last.status), " ", h("span", { class: "muted" }, when(last.finishedAt || last.startedAt))]
            : h("span", { class: "muted" }, "none"),
        );
      })
      .catch((e) => fill(release, problem(e)));
    drifts.push(() =>
      api(`${stackPath(st.project, st.stack)}/drift`, { signal: page.signal })
        .then((d) => fill(driftCell, badge(d.status)))
        .catch((e) => fill(driftCell, problem(e))),
    );
  }
  // A drift check opens the stack and reads every resource live: a few stacks at a time, so
  // a large checkout does not open all of its stacks at once on the server.
  const next = async () => {
    for (let job = drifts.shift(); job && !page.signal.aborted; job = drifts.shift()) await job();
  };
  await Promise.all([next(), next(), next(), next()]);
}

// --- one stack ------------------------------------------------------------------------------

async function start(p, s, kind, status) {
  try {
    // An apply from the console waits for readiness, so the page shows the resources' health.
    const body = kind === "apply" ? { kind, watch: true } : { kind };
    const op = await api(`${stackPath(p, s)}/operations`, { method: "POST", body });
    go(`#/operations/${seg(op.id)}`);
  } catch (e) {
    fill(status, problem(e));
  }
}

function historyTable(p, s, releases) {
  if (releases.length === 0) return h("p", { class: "muted" }, "No releases yet.");
  const pick = (name, value) => h("select", { id: `compare-${name}`, name }, releases.map((r) => h("option", { value: r.revision, selected: r.revision === value }, `#${r.revision} ${r.operation}`)));
  const last = releases[releases.length - 1].revision;
  const from = pick("from", Math.max(1, last - 1));
  const to = pick("to", last);
  return h(
    "div",
    {},
    h(
      "table",
      { class: "releases" },
      h("thead", {}, h("tr", {}, ["revision", "operation", "status", "started", "finished", "resources", "steps", "by"].map((t) => h("th", {}, t)))),
      h(
        "tbody",
        {},
        releases
          .slice()
          .reverse()
          .map((r) =>
            h(
              "tr",
              { class: "release-row", "data-revision": r.revision },
              h("td", {}, h("a", { href: `${stackHash(p, s)}/releases/${r.revision}` }, `#${r.revision}`)),
              h("td", {}, r.operation),
              h("td", {}, badge(r.status)),
              h("td", {}, when(r.startedAt)),
              h("td", {}, when(r.finishedAt)),
              h("td", {}, r.resources),
              h("td", {}, r.steps),
              h("td", { class: "muted" }, r.holder),
            ),
          ),
      ),
    ),
    h(
      "form",
      {
        class: "compare-form",
        onsubmit: (event) => {
          event.preventDefault();
          go(`${stackHash(p, s)}/compare/${seg(from.value)}/${seg(to.value)}`);
        },
      },
      "Compare release ",
      from,
      " with ",
      to,
      " ",
      h("button", { type: "submit", id: "compare-button" }, "Compare"),
    ),
  );
}

function operationsList(ops) {
  if (ops.length === 0) return h("p", { class: "muted" }, "No operations in this server yet.");
  return h(
    "table",
    { class: "operations" },
    h("thead", {}, h("tr", {}, ["operation", "kind", "status", "requested by", "created"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      ops
        .slice()
        .reverse()
        .map((o) =>
          h(
            "tr",
            { "data-operation": o.id },
            h("td", {}, h("a", { href: `#/operations/${seg(o.id)}` }, o.id.slice(0, 8))),
            h("td", {}, o.kind),
            h("td", {}, badge(o.status)),
            h("td", {}, o.requestedBy),
            h("td", {}, when(o.createdAt)),
          ),
        ),
    ),
  );
}

async function stackPage(p, s) {
  const stack = await api(stackPath(p, s), { signal: page.signal });
  const status = h("div", { id: "action-status" });
  const graph = h("div", { class: "graph-box", id: "graph" });
  const policy = h("div", { id: "policy" });
  const driftBox = h("div", { id: "drift" });
  const ops = h("div", { id: "operations" });
  const history = h("div", { id: "history" });
  const runs = h("div", { id: "runs" });
  fill(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Stacks"), " / ", p, " / ", s),
    h("h1", {}, `${p} / ${s}`, stack.requireApproval ? h("span", { class: "tag" }, "approval required") : null),
    stack.description ? h("p", {}, stack.description) : null,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", id: "preview-button", onclick: () => start(p, s, "preview", status) }, "Preview"),
      h("button", { type: "button", id: "apply-button", class: "primary", onclick: () => start(p, s, "apply", status) }, "Apply"),
      h("button", { type: "button", id: "destroy-button", class: "danger", onclick: () => confirm(`Destroy every resource of ${p}/${s}?`) && start(p, s, "destroy", status) }, "Destroy"),
      status,
    ),
    section("Resource graph", "graph-section", graph),
    section("Policy findings", "policy-section", policy),
    section("Drift", "drift-section", driftBox),
    section("Operations", "operations-section", ops),
    section("History", "history-section", history),
    section("Day-2 runs", "runs-section", runs),
  );
  const base = stackPath(p, s);
  into(graph, "the graph", async () => drawGraph(await api(`${base}/graph`, { signal: page.signal })).svg);
  into(policy, "policy findings", async () => findings(await api(`${base}/policy`, { signal: page.signal })));
  into(driftBox, "drift", async () => {
    const d = await api(`${base}/drift`, { signal: page.signal });
    return [h("p", {}, "Status: ", badge(d.status, { id: "drift-badge" })), drift(d)];
  });
  into(ops, "operations", async () => {
    const all = (await api("/api/v1/operations", { signal: page.signal })).filter((o) => o.project === p && o.stack === s);
    const waiting = all.filter((o) => o.status === "awaiting_approval");
    return [
      waiting.length
        ? h(
            "div",
            { class: "card approval", id: "awaiting" },
            h("strong", {}, `${waiting.length} operation(s) wait for approval: `),
            waiting.map((o) => [h("a", { href: `#/operations/${seg(o.id)}`, class: "review-link" }, `review the ${o.kind} ${o.requestedBy} asked for`), " "]),
          )
        : null,
      operationsList(all),
    ];
  });
  into(history, "history", async () => historyTable(p, s, await api(`${base}/releases`, { signal: page.signal })));
  into(runs, "runs", async () => runsTable(await api(`${base}/runs`, { signal: page.signal })));
}

/** The stack's day-2 runs (`kusionctl run`), newest first, each target's outcome below. */
function runsTable(records) {
  if (records.length === 0) return h("p", { class: "muted" }, "No day-2 runs recorded.");
  return h(
    "table",
    { class: "runs" },
    h("thead", {}, h("tr", {}, ["run", "program", "status", "started", "by", "targets"].map((t) => h("th", {}, t)))),
    h(
      "tbody",
      {},
      records
        .slice()
        .reverse()
        .map((r) =>
          h(
            "tr",
            { class: "run-row", "data-run": r.id },
            h("td", {}, `#${r.id}`),
            h("td", {}, h("code", {}, r.program), r.args.length ? h("span", { class: "muted" }, ` -D ${r.args.join(" -D ")}`) : null),
            h("td", {}, badge(r.status)),
            h("td", {}, when(r.startedAt)),
            h("td", {}, `${r.holder.owner}@${r.holder.host}`),
            h(
              "td",
              {},
              r.targets.map((t) => h("div", {}, badge(t.outcome.replace(/ /g, "_")), " ", h("code", {}, t.target), t.reason ? h("span", { class: "muted" }, ` ${t.reason}`) : null)),
              (r.notes || []).map((n) => h("div", { class: "muted" }, n)),
            ),
          ),
        ),
    ),
  );
}

// --- releases -------------------------------------------------------------------------------

async function releasePage(p, s, revision) {
  const base = stackPath(p, s);
  const release = await api(`${base}/releases/${seg(revision)}`, { signal: page.signal });
  const n = Number(revision);
  const changes = h("div", { id: "release-changes" });
  const graph = h("div", { class: "graph-box", id: "graph" });
  const outcome = new Map((release.steps || []).map((st) => [st.id, stepOutcome(st)]));
  fill(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Stacks"), " / ", h("a", { href: stackHash(p, s) }, `${p} / ${s}`), " / release ", `#${n}`),
    h("h1", {}, `Release #${n} `, badge(release.status, { id: "release-status" })),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "operation"),
      h("dd", {}, release.operation),
      h("dt", {}, "started"),
      h("dd", {}, when(release.startedAt)),
      h("dt", {}, "finished"),
      h("dd", {}, when(release.finishedAt)),
      h("dt", {}, "resources"),
      h("dd", {}, (release.spec && release.spec.resources ? release.spec.resources.length : 0)),
      (release.notes || []).length ? [h("dt", {}, "notes"), h("dd", {}, release.notes.join("; "))] : null,
    ),
    section(n > 1 ? `Changes since release #${n - 1}` : "Changes (first release)", "changes-section", changes),
    section("Resource graph of this release", "graph-section", graph),
    section(
      "Steps",
      "steps-section",
      h(
        "table",
        { class: "steps" },
        h("thead", {}, h("tr", {}, h("th", {}, "resource"), h("th", {}, "action"), h("th", {}, "outcome"))),
        h("tbody", {}, (release.steps || []).map((st) => h("tr", {}, h("td", {}, h("code", {}, st.id)), h("td", {}, String(st.action || "")), h("td", {}, badge(stepOutcome(st)))))),
      ),
    ),
    section("Record", "record-section", h("details", {}, h("summary", {}, "The release as recorded (JSON)"), h("pre", { id: "release-json" }, JSON.stringify(release, null, 2)))),
  );
  into(changes, "changes", async () => {
    if (n <= 1) {
      const items = (release.spec.resources || []).map((r) => ({ id: r.id, type: r.type, change: "added", changes: Object.entries(r.attributes || {}).map(([k, v]) => ({ path: `attributes.${k}`, kind: "added", new: v })) }));
      return resourceDiffs(items, (r) => r.change);
    }
    const cmp = await api(`${base}/releases/compare?from=${n - 1}&to=${n}`, { signal: page.signal });
    return resourceDiffs(cmp.resources, (r) => r.change);
  });
  into(graph, "the graph", async () => {
    const g = await api(`${base}/graph?revision=${n}`, { signal: page.signal });
    return drawGraph(g, outcome).svg;
  });
}

function stepOutcome(step) {
  return String((step && step.outcome) || "unknown").toLowerCase();
}

async function comparePage(p, s, from, to) {
  const base = stackPath(p, s);
  const releases = await api(`${base}/releases`, { signal: page.signal });
  const out = h("div", { id: "comparison" });
  fill(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Stacks"), " / ", h("a", { href: stackHash(p, s) }, `${p} / ${s}`), " / compare"),
    h("h1", {}, `Release #${from} \u2192 #${to}`),
    section("History", "history-section", historyTable(p, s, releases)),
    section("Field-level differences", "comparison-section", out),
  );
  for (const [name, value] of [["from", from], ["to", to]]) {
    const select = document.getElementById(`compare-${name}`);
    if (select) select.value = String(value);
  }
  into(out, "the comparison", async () => {
    const cmp = await api(`${base}/releases/compare?from=${seg(from)}&to=${seg(to)}`, { signal: page.signal });
    const sum = cmp.summary;
    return [
      h("p", { class: "counts" }, `${sum.added} added, ${sum.changed} changed, ${sum.removed} removed, ${sum.unchanged} unchanged`),
      resourceDiffs(cmp.resources, (r) => r.change),
    ];
  });
}

// --- one operation --------------------------------------------------------------------------

function describe(event) {
  const d = event.data || {};
  switch (d.type) {
    case "status":
      return [badge(d.status), d.message ? ` ${d.message}` : ""];
    case "planned":
      return `planned: ${d.create} to create, ${d.update} to update, ${d.replace} to replace, ${d.delete} to delete, ${d.unchanged} unchanged`;
    case "step_started":
      return [h("code", {}, d.id), ` ${d.action} started`];
    case "step_finished":
      return [h("code", {}, d.id), ` ${d.action} `, badge(d.outcome), d.reason ? ` ${d.reason}` : ""];
    case "watch":
      return [h("code", {}, d.id), ` ${d.health}: ${d.detail}`];
    case "run_planned":
      return `run planned: ${d.operations} operation(s), ${d.targets} target(s), ${d.unresolved} unresolved`;
    case "run_progress":
      return runProgress(d.progress || {});
    default:
      return JSON.stringify(d);
  }
}

/** A day-2 run's progress event, as `kusionctl run` prints it. */
function runProgress(p) {
  switch (p.event) {
    case "batchStarted":
      return `${p.operation}: cluster ${p.cluster} batch ${p.batch}/${p.batches} started (${(p.targets || []).length} target(s))`;
    case "acted":
      return p.result && "Ok" in p.result
        ? [h("code", {}, p.target), ` ${p.result.Ok}`]
        : [h("code", {}, p.target), " ", badge("failed"), ` ${p.result ? p.result.Err : ""}`];
    case "waiting":
      return `${p.operation} ${p.cluster} batch ${p.batch}: ${p.detail}`;
    case "batchDone":
      return [`${p.operation}: cluster ${p.cluster} batch ${p.batch}: ${p.recovered} recovered, ${p.failed} not `, badge(p.failed ? "failed" : "succeeded")];
    case "operationSkipped":
      return `${p.operation}: skipped, ${p.reason}`;
    default:
      return JSON.stringify(p);
  }
}

async function operationPage(id) {
  let op = await api(`/api/v1/operations/${seg(id)}`, { signal: page.signal });
  const header = h("div", { id: "op-header" });
  const decision = h("div", { id: "decision" });
  const plan = h("div", { id: "plan" });
  const policy = h("div", { id: "op-policy" });
  const graphBox = h("div", { class: "graph-box", id: "graph" });
  const progress = h("progress", { id: "progress", max: 1, value: 0 });
  const progressText = h("span", { id: "progress-text", class: "muted" });
  const log = h("ol", { id: "events", class: "events" });
  fill(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/" }, "Stacks"), " / ", h("a", { href: stackHash(op.project, op.stack) }, `${op.project} / ${op.stack}`), " / operation"),
    header,
    decision,
    section("Live progress", "progress-section", h("p", {}, progress, " ", progressText), graphBox, h("h3", {}, "Events"), log),
    section("Plan", "plan-section", plan),
    section("Policy findings", "policy-section", policy),
  );
  const steps = new Map();
  let planned = 0;
  let graph = null;
  const showProgress = () => {
    const done = [...steps.values()].filter((v) => v !== "running").length;
    progress.max = Math.max(planned, 1);
    progress.value = done;
    progressText.textContent = planned ? `${done} of ${planned} changes done` : "";
  };
  const render = () => {
    fill(
      header,
      h("h1", {}, `${op.kind} of ${op.project}/${op.stack} `, badge(op.status, { id: "op-status" })),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "operation"),
        h("dd", {}, h("code", { id: "op-id" }, op.id)),
        h("dt", {}, "requested by"),
        h("dd", {}, op.requestedBy, " at ", when(op.createdAt)),
        op.approvedBy ? [h("dt", {}, "approved by"), h("dd", { id: "approved-by" }, op.approvedBy)] : null,
        op.rejectedBy ? [h("dt", {}, "rejected by"), h("dd", {}, op.rejectedBy)] : null,
        op.cancelledBy ? [h("dt", {}, "cancelled by"), h("dd", { id: "cancelled-by" }, op.cancelledBy)] : null,
        op.worker ? [h("dt", {}, "worker"), h("dd", {}, op.worker)] : null,
        op.sourceRevision ? [h("dt", {}, "commit"), h("dd", { id: "op-commit" }, h("code", {}, op.sourceRevision))] : null,
        op.program ? [h("dt", {}, "program"), h("dd", { id: "op-program" }, h("code", {}, [op.program, ...(op.args || []).map((a) => ` -D ${a}`)].join("")))] : null,
        op.run ? [h("dt", {}, "run"), h("dd", { id: "op-run" }, h("a", { href: `${stackHash(op.project, op.stack)}` }, `#${op.run}`))] : null,
        op.revision ? [h("dt", {}, "release"), h("dd", {}, h("a", { id: "release-link", href: `${stackHash(op.project, op.stack)}/releases/${op.revision}` }, `#${op.revision}`))] : null,
        op.error ? [h("dt", {}, "error"), h("dd", { class: "problem" }, op.error)] : null,
      ),
    );
    const status = h("span", { id: "decision-status" });
    // The server decides; the page only says beforehand what it would answer.
    const role = roleOn(op.project);
    const approver = ROLES.indexOf(role) >= ROLES.indexOf("approver");
    const own = me && me.subject === op.requestedBy;
    const why = !approver
      ? `Your role on ${op.project} is ${role || "none"}: someone with the approver role decides.`
      : own
        ? "You asked for this operation: a different person must approve it."
        : null;
    // Operators may stop an operation that has not ended: a waiting one ends at once, a running
    // one starts no new step.
    const operator = ROLES.indexOf(role) >= ROLES.indexOf("operator");
    const cancellable = ["queued", "awaiting_approval", "running"].includes(op.status) && !op.cancelledBy;
    const cancel = cancellable
      ? h(
          "p",
          { class: "cancel" },
          h("button", { type: "button", id: "cancel-button", disabled: !operator, onclick: () => decide("cancel", status) }, "Cancel operation"),
          " ",
          h("span", { class: "muted" }, op.status === "running" ? "No new step starts; steps under way finish." : "Nothing has changed yet."),
        )
      : op.cancelledBy && op.status === "running"
        ? h("p", { class: "muted", id: "cancel-note" }, `${op.cancelledBy} asked to cancel: no new step starts.`)
        : null;
    fill(
      decision,
      cancel,
      op.status === "awaiting_approval"
        ? h(
            "div",
            { class: "card approval" },
            h("p", {}, h("strong", {}, "This operation waits for a second person's approval. "), "Approving runs exactly the plan below; if the stack changed meanwhile the apply stops without changing anything."),
            h("button", { type: "button", class: "primary", id: "approve-button", disabled: !approver || own, onclick: () => decide("approve", status) }, "Approve"),
            " ",
            h("button", { type: "button", class: "danger", id: "reject-button", disabled: !approver, onclick: () => decide("reject", status) }, "Reject"),
            " ",
            why ? h("span", { class: "muted", id: "decision-note" }, why) : null,
            status,
          )
        : null,
    );
    fill(plan, op.kind === "run" ? runPlanView(op.plan) : planView(op.plan));
    fill(policy, op.policy ? findings(op.policy) : h("p", { class: "muted" }, "No policy verdict recorded for this operation."));
  };
  const decide = async (what, status) => {
    try {
      op = await api(`/api/v1/operations/${seg(id)}/${what}`, { method: "POST" });
      render();
    } catch (e) {
      fill(status, problem(e));
    }
  };
  const refresh = async () => {
    try {
      op = await api(`/api/v1/operations/${seg(id)}`, { signal: page.signal });
      render();
    } catch (e) {
      if (!page.signal.aborted) fill(decision, problem(e));
    }
  };
  render();
  into(graphBox, "the graph", async () => {
    graph = drawGraph(await api(`${stackPath(op.project, op.stack)}/graph`, { signal: page.signal }), steps);
    return graph.svg;
  });
  const onEvent = (event) => {
    const d = event.data || {};
    log.append(h("li", { class: `event e-${d.type}`, "data-seq": d.seq }, h("span", { class: "muted" }, `${d.seq} ${when(d.time)} `), describe(event)));
    if (d.type === "planned") {
      planned = d.create + d.update + d.replace + d.delete;
    } else if (d.type === "step_started") {
      steps.set(d.id, "running");
    } else if (d.type === "step_finished") {
      steps.set(d.id, d.outcome);
    } else if (d.type === "status") {
      refresh();
    }
    if (graph && steps.has(d.id)) graph.setState(d.id, steps.get(d.id));
    showProgress();
  };
  streamEvents(id, onEvent, page.signal)
    .then(() => {
      if (!page.signal.aborted) log.append(h("li", { class: "event end muted", id: "stream-end" }, "stream ended"));
      refresh();
    })
    .catch((e) => {
      if (!page.signal.aborted) log.append(h("li", { class: "event" }, problem(e)));
    });
}

// --- routing --------------------------------------------------------------------------------

async function route() {
  page.abort();
  page = new AbortController();
  const hash = location.hash || "#/";
  if (!session.token || hash === "#/signin") {
    signIn(hash === "#/signin" ? "#/" : hash);
    return;
  }
  // The pages say what the caller may do: know who it is first.
  if (!me) await showWho();
  const parts = hash.slice(2).split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts.length === 0) await stacksPage();
    else if (parts[0] === "stacks" && parts.length === 3) await stackPage(parts[1], parts[2]);
    else if (parts[0] === "stacks" && parts[3] === "releases" && parts.length === 5) await releasePage(parts[1], parts[2], parts[4]);
    else if (parts[0] === "stacks" && parts[3] === "compare" && parts.length === 6) await comparePage(parts[1], parts[2], parts[4], parts[5]);
    else if (parts[0] === "operations" && parts.length === 2) await operationPage(parts[1]);
    else fill(main, problem(new ApiError(404, { title: "Not found", detail: `no page ${hash}` })));
  } catch (e) {
    // A refused token already shows the sign-in form.
    if (page.signal.aborted || (e instanceof ApiError && e.status === 401)) return;
    fill(main, problem(e));
  }
}

onUnauthorized(() => {
  session.clear();
  showWho();
  signIn(location.hash, "The server refused the token (unknown, revoked or expired): sign in again.");
});

document.getElementById("signout").addEventListener("click", () => {
  session.clear();
  me = null;
  showWho();
  go("#/signin");
});
window.addEventListener("hashchange", route);
route();
