//! Human and JSON renderings of plans, reports and state. Every value shown goes through the
//! masking of sensitive fields first.

use comfy_table::{Table, presets::NOTHING};
use console::Style;
use kusion_kernel::diff::{self, ChangeKind};
use kusion_kernel::execute::{ApplyReport, Outcome, StepReport};
use kusion_kernel::plan::{Action, PlanView};
use kusion_kernel::state::StateEntry;
use kusion_sdk::FieldPath;
use serde_json::{Value, json};

pub struct Styles {
    pub color: bool,
}

impl Styles {
    fn style(&self, s: Style) -> Style {
        if self.color { s } else { Style::new() }
    }
    pub fn action(&self, action: Action) -> Style {
        self.style(match action {
            Action::Create | Action::Import => Style::new().green(),
            Action::Update | Action::Replace => Style::new().yellow(),
            Action::Delete => Style::new().red(),
            Action::UnChanged => Style::new().dim(),
        })
    }
    pub fn bold(&self) -> Style {
        self.style(Style::new().bold())
    }
    pub fn red(&self) -> Style {
        self.style(Style::new().red())
    }
    pub fn green(&self) -> Style {
        self.style(Style::new().green())
    }
    pub fn yellow(&self) -> Style {
        self.style(Style::new().yellow())
    }
    pub fn dim(&self) -> Style {
        self.style(Style::new().dim())
    }
}

/// Now, as RFC 3339 with milliseconds (timestamps of JSON progress lines).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// A table in the CLI's listing style: no borders, one header row.
pub fn plain_table(header: Vec<&str>) -> Table {
    let mut table = Table::new();
    table.load_preset(NOTHING);
    table.set_header(header);
    table
}

pub fn plan_table(plan: &PlanView, styles: &Styles) -> String {
    let mut table = plain_table(vec!["ID", "Type", "Action"]);
    for step in &plan.steps {
        table.add_row(vec![
            step.key(),
            step.resource_type.clone(),
            styles
                .action(step.action)
                .apply_to(step.action.to_string())
                .to_string(),
        ]);
    }
    table.to_string()
}

pub fn plan_summary_line(plan: &PlanView) -> String {
    let s = plan.summary;
    format!(
        "Plan: {} to create, {} to update, {} to replace, {} to delete, {} to import, {} unchanged.",
        s.create, s.update, s.replace, s.delete, s.import, s.unchanged
    )
}

fn show(v: &Option<Value>) -> String {
    match v {
        None => String::new(),
        Some(Value::String(s)) => format!("{s:?}"),
        Some(other) => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The changes of every changing step as indented trees (see [`crate::diff_view`]).
pub fn plan_details(plan: &PlanView, styles: &Styles) -> String {
    use crate::diff_view::{self, Mark};
    let mut out = String::new();
    for step in plan.steps.iter().filter(|s| s.action.changes_something()) {
        let why = if step.forces_replacement.is_empty() {
            String::new()
        } else {
            format!(
                " ({} cannot change in place: delete, then create)",
                step.forces_replacement.join(", ")
            )
        };
        out.push_str(&format!(
            "{} {}{why}\n",
            styles.action(step.action).apply_to(step.action.to_string()),
            styles.bold().apply_to(step.key())
        ));
        // Creations and deletions carry the whole object as top-level entries.
        let top = |kind: ChangeKind| -> Option<serde_json::Map<String, Value>> {
            step.changes
                .iter()
                .map(|c| match (c.kind == kind, c.path.0.as_slice()) {
                    (true, [kusion_sdk::Segment::Key(k)]) => {
                        let v = if kind == ChangeKind::Added {
                            &c.new
                        } else {
                            &c.old
                        };
                        Some((k.clone(), v.clone().unwrap_or(Value::Null)))
                    }
                    _ => None,
                })
                .collect()
        };
        let tree = match (step.action, &step.before, &step.after) {
            (_, Some(before), Some(after)) => {
                Some(diff_view::changes(before, after, &step.forces_replacement))
            }
            (Action::Create, _, _) => {
                top(ChangeKind::Added).map(|m| diff_view::whole(&m, Mark::Added))
            }
            (Action::Delete, _, _) => {
                top(ChangeKind::Removed).map(|m| diff_view::whole(&m, Mark::Removed))
            }
            _ => None,
        };
        match tree {
            Some(tree) => out.push_str(&tree.render("  ", styles)),
            None => {
                for c in &step.changes {
                    let line = match c.kind {
                        ChangeKind::Added => styles
                            .green()
                            .apply_to(format!("  + {}: {}", c.path, show(&c.new)))
                            .to_string(),
                        ChangeKind::Removed => styles
                            .red()
                            .apply_to(format!("  - {}: {}", c.path, show(&c.old)))
                            .to_string(),
                        ChangeKind::Changed => styles
                            .yellow()
                            .apply_to(format!(
                                "  ~ {}: {} => {}",
                                c.path,
                                show(&c.old),
                                show(&c.new)
                            ))
                            .to_string(),
                    };
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
        for u in &step.unknown {
            // Paths of an update are already in its tree, marked `(known after apply)`.
            if step.after.is_some() && kusion_sdk::FieldPath::parse(u).is_ok() {
                continue;
            }
            out.push_str(
                &styles
                    .dim()
                    .apply_to(format!("  ? {u}: (known after apply)\n"))
                    .to_string(),
            );
        }
    }
    out
}

/// With `--target`: that the rest of the stack was neither planned nor compared with what is
/// live, so a converged-looking plan says nothing about it.
pub fn narrowed_warning(plan: &PlanView, styles: &Styles) -> Option<String> {
    let n = plan.narrowed.as_ref()?;
    Some(
        styles
            .yellow()
            .apply_to(format!(
                "Warning: --target {} planned {} resource(s); {} other(s) of the stack were not planned or compared with what is live. Run without --target to converge the whole stack.",
                n.patterns.join(", "),
                n.planned,
                n.left_out
            ))
            .to_string(),
    )
}

pub fn plan_json(plan: &PlanView) -> Value {
    serde_json::to_value(plan).unwrap_or(Value::Null)
}

pub fn report_json(report: &ApplyReport, revision: Option<u64>, verb: &str) -> Value {
    json!({
        "revision": revision,
        "succeeded": report.succeeded(),
        "interrupted": report.interrupted,
        "created": report.created(),
        "updated": report.updated(),
        "replaced": report.replaced(),
        "deleted": report.deleted(),
        "summary": report.summary_line(verb),
        "steps": report.steps,
    })
}

/// Failed and skipped steps, one line each; failures that say the same thing but for their
/// resource (a cluster that cannot be reached) are one line naming how many and a few.
pub fn failures(report: &ApplyReport, styles: &Styles) -> String {
    let mut out = String::new();
    let mut groups: Vec<(String, Vec<&StepReport>)> = Vec::new();
    for s in &report.steps {
        if let Outcome::Failed(e) = &s.outcome {
            let id = s.id.split_once('@').map_or(s.id.as_str(), |(id, _)| id);
            let general = e
                .replace(&format!("{}: ", s.id), "")
                .replace(&format!("{id}: "), "");
            match groups.iter_mut().find(|(m, _)| *m == general) {
                Some((_, steps)) => steps.push(s),
                None => groups.push((general, vec![s])),
            }
        }
    }
    for (general, steps) in &groups {
        if let [s] = steps.as_slice() {
            if let Outcome::Failed(e) = &s.outcome {
                out.push_str(&format!(
                    "{} {} ({}): {e}\n",
                    styles.red().apply_to("failed"),
                    s.id,
                    s.action
                ));
            }
        } else {
            let mut named: Vec<&str> = steps.iter().take(3).map(|s| s.id.as_str()).collect();
            let more = steps.len().saturating_sub(named.len());
            let mut list = named.join(", ");
            if more > 0 {
                list.push_str(&format!(" and {more} more"));
            }
            named.clear();
            out.push_str(&format!(
                "{} {} resources: {general}\n  ({list})\n",
                styles.red().apply_to("failed"),
                steps.len()
            ));
        }
    }
    for s in &report.steps {
        if let Outcome::Skipped(e) = &s.outcome {
            out.push_str(&format!(
                "{} {} ({}): {e}\n",
                styles.yellow().apply_to("skipped"),
                s.id,
                s.action
            ));
        }
    }
    out
}

/// A state entry as shown to people and machines: sensitive values masked, private data hidden.
pub fn masked_entry(entry: &StateEntry) -> Value {
    let mut sensitive: Vec<FieldPath> = diff::builtin_sensitive_paths(&entry.resource);
    sensitive.extend(
        entry
            .sensitive_paths
            .iter()
            .filter_map(|p| FieldPath::parse(p).ok()),
    );
    let mut attrs = Value::Object(entry.resource.attributes.clone());
    diff::mask(&mut attrs, &sensitive);
    json!({
        "id": entry.resource.id,
        "type": entry.resource.resource_type,
        "attributes": attrs,
        "dependsOn": entry.resource.depends_on,
        "extensions": entry.resource.extensions,
        "pending": entry.pending,
        "updatedAt": kusion_kernel::state::format_time(entry.updated_at),
    })
}

/// Sealed values (hashes or ciphertext, as history keeps secrets) shown as the mask: neither
/// form means anything to a reader, and ciphertext is not for printing.
pub fn mask_sealed(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(mask_sealed),
        Value::Object(map) => map.values_mut().for_each(mask_sealed),
        Value::String(s) if s.starts_with(kusion_kernel::state::seal::PREFIX) => {
            *s = diff::MASK.to_string();
        }
        _ => {}
    }
}

/// Stored records keep times as epoch milliseconds; every output shows them as ISO 8601 (UTC).
/// Only the record's own `...At` fields are touched, never user data nested below (a spec).
pub fn iso_times(value: &mut Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(iso_times),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if key.ends_with("At")
                    && let Some(ms) = v.as_u64()
                {
                    *v = Value::String(kusion_kernel::state::format_time(ms));
                }
            }
        }
        _ => {}
    }
}

/// Asks `question` on the terminal until the answer is yes or no (end of input and an empty
/// line are no). With `details`, `details`/`d` runs it and asks again.
pub(crate) fn confirm(question: &str, details: Option<&dyn Fn()>) -> bool {
    use std::io::{BufRead, Write};
    let stdin = std::io::stdin();
    let (choices, again) = match details {
        Some(_) => ("yes/details/no", "yes, details or no"),
        None => ("yes/no", "yes or no"),
    };
    loop {
        print!("{question} [{choices}]: ");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        match (line.trim().to_ascii_lowercase().as_str(), details) {
            ("y" | "yes", _) => return true,
            ("d" | "details", Some(show)) => show(),
            ("n" | "no" | "", _) => return false,
            (other, _) => println!("Please answer {again} (not {other:?})."),
        }
    }
}
