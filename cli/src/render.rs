//! Human and JSON renderings of plans, reports and state. Every value shown goes through the
//! masking of sensitive fields first.

use comfy_table::{Table, presets::NOTHING};
use console::Style;
use kusion_kernel::apply::{ApplyReport, Outcome};
use kusion_kernel::diff::{self, ChangeKind};
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

pub fn plan_table(plan: &PlanView, styles: &Styles) -> String {
    let mut table = Table::new();
    table.load_preset(NOTHING);
    table.set_header(vec!["ID", "Type", "Action"]);
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

pub fn plan_details(plan: &PlanView, styles: &Styles) -> String {
    let mut out = String::new();
    for step in plan.steps.iter().filter(|s| s.action.changes_something()) {
        out.push_str(&format!(
            "{} {}\n",
            styles.action(step.action).apply_to(step.action.to_string()),
            styles.bold().apply_to(step.key())
        ));
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
        for u in &step.unknown {
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

pub fn failures(report: &ApplyReport, styles: &Styles) -> String {
    let mut out = String::new();
    for s in &report.steps {
        match &s.outcome {
            Outcome::Failed(e) => out.push_str(&format!(
                "{} {} ({}): {e}\n",
                styles.red().apply_to("failed"),
                s.id,
                s.action
            )),
            Outcome::Skipped(e) => out.push_str(&format!(
                "{} {} ({}): {e}\n",
                styles.yellow().apply_to("skipped"),
                s.id,
                s.action
            )),
            _ => {}
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
