//! The runtime conformance suite (`kusionctl plugin test`): checks a runtime plugin, native or
//! WASM, against the contract of `kusion_sdk::runtime` with a sample resource its author
//! supplies. Each check passes, fails with the reason, or is skipped when the runtime does not
//! declare the capability it needs.
//!
//! The checks create, update and delete the sample for real: run them against a scratch target.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kusion_sdk::runtime::{
    ApplyRequest, DeleteRequest, Health, ImportRequest, ReadRequest, Runtime, WatchPoll,
    WatchRequest,
};
use kusion_sdk::{ErrorKind, PluginResult, Resource, Value};
use serde::{Deserialize, Serialize};

/// What the suite works with, from the runtime's author.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sample {
    /// Sent with `configure` before the checks (none: not configured).
    #[serde(default)]
    pub config: Value,
    /// A resource to create; it must not exist yet.
    pub create: Resource,
    /// The same resource (same ID and type) with changed attributes.
    pub update: Resource,
    /// A resource the runtime must refuse with an `invalidInput` or `rejected` error.
    pub invalid: Resource,
    /// How long `watch` may take to report the updated resource ready.
    #[serde(default = "default_watch_timeout", with = "millis")]
    pub watch_timeout: Duration,
}

fn default_watch_timeout() -> Duration {
    Duration::from_secs(30)
}

/// `watchTimeout` as whole milliseconds.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "result", content = "detail")]
pub enum Verdict {
    /// The runtime did what the check expects.
    Passed,
    /// It did not (what happened).
    Failed(String),
    /// Not applicable, and why (the runtime lacks the capability).
    Skipped(String),
}

/// One conformance check and its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// Its name.
    pub name: &'static str,
    /// What the check asks of the runtime, in one line.
    pub expects: &'static str,
    /// How it went.
    pub verdict: Verdict,
}

/// Every check's outcome, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    /// Every check, in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Whether no check failed.
    pub fn passed(&self) -> bool {
        !self
            .checks
            .iter()
            .any(|c| matches!(c.verdict, Verdict::Failed(_)))
    }

    fn record(&mut self, name: &'static str, expects: &'static str, verdict: Verdict) -> bool {
        let ok = verdict == Verdict::Passed;
        self.checks.push(Check {
            name,
            expects,
            verdict,
        });
        ok
    }
}

/// How long a call with a short timeout may take before the runtime is said to ignore it.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

/// The short timeout given to the timeout check's call.
const SHORT_TIMEOUT: Duration = Duration::from_millis(100);

/// Run every check against `runtime`. Later checks build on earlier ones (an update needs the
/// create), so a failed prerequisite skips what depends on it.
pub fn run(runtime: Arc<dyn Runtime>, sample: &Sample) -> Report {
    let mut report = Report::default();
    let info = runtime.describe();

    let described = describe_check(&info, sample);
    let ok = report.record(
        "describe",
        "names itself, speaks this ABI, and serves the sample's type",
        described,
    );
    if !ok {
        return report;
    }
    if !sample.config.is_null() {
        let verdict = match runtime.configure(&sample.config) {
            Ok(()) => Verdict::Passed,
            Err(e) => fail_with("configure", &e),
        };
        if !report.record("configure", "accepts the sample configuration", verdict) {
            return report;
        }
    }

    let absent = match live(runtime.as_ref(), &sample.create) {
        Ok(None) => Verdict::Passed,
        Ok(Some(_)) => Verdict::Failed(format!(
            "{} already exists: run the suite against a scratch target",
            sample.create.id
        )),
        Err(e) => fail_with("read", &e),
    };
    if !report.record(
        "absent",
        "read of a missing object answers absent, not an error",
        absent,
    ) {
        return report;
    }

    let dry_run = if info.capabilities.dry_run {
        match runtime.apply(&apply(None, &sample.create, true, None)) {
            Err(e) => fail_with("apply (dry-run)", &e),
            Ok(answer) if answer.resource.id != sample.create.id => Verdict::Failed(format!(
                "the dry-run answered for `{}`, not `{}`",
                answer.resource.id, sample.create.id
            )),
            Ok(_) => match live(runtime.as_ref(), &sample.create) {
                Ok(None) => Verdict::Passed,
                Ok(Some(_)) => Verdict::Failed("a dry-run created the object".into()),
                Err(e) => fail_with("read after the dry-run", &e),
            },
        }
    } else {
        Verdict::Skipped("the runtime does not declare dryRun".into())
    };
    report.record("dry-run", "a dry-run answers and changes nothing", dry_run);

    let created = applied_and_read(runtime.as_ref(), None, &sample.create);
    if !report.record(
        "create",
        "apply creates the object and read shows the planned attributes",
        created,
    ) {
        return report;
    }

    let updated = applied_and_read(runtime.as_ref(), Some(&sample.create), &sample.update);
    let update_ok = report.record(
        "update",
        "apply with the prior resource updates it and read shows the change",
        updated,
    );

    let imported = if !info.capabilities.import {
        Verdict::Skipped("the runtime does not declare import".into())
    } else {
        match runtime.import(&ImportRequest {
            planned: sample.update.clone(),
            import_id: None,
            timeout: None,
        }) {
            Ok(answer) if answer.resource.is_some() => Verdict::Passed,
            Ok(_) => Verdict::Failed("import of an existing object answered absent".into()),
            Err(e) => fail_with("import", &e),
        }
    };
    report.record("import", "import adopts the existing object", imported);

    let watched = if !info.capabilities.watch {
        Verdict::Skipped("the runtime does not declare watch".into())
    } else if !update_ok {
        Verdict::Skipped("the update failed".into())
    } else {
        watch_until_ready(runtime.as_ref(), &sample.update, sample.watch_timeout)
    };
    report.record("watch", "watch reports the applied object ready", watched);

    let refused = match runtime.apply(&apply(None, &sample.invalid, false, None)) {
        Ok(_) => Verdict::Failed(format!(
            "the invalid resource `{}` was accepted",
            sample.invalid.id
        )),
        Err(e) if matches!(e.kind, ErrorKind::InvalidInput | ErrorKind::Rejected) => {
            if e.message.trim().is_empty() {
                Verdict::Failed(format!("the `{:?}` error has no message", e.kind))
            } else {
                Verdict::Passed
            }
        }
        Err(e) => Verdict::Failed(format!(
            "expected an invalidInput or rejected error, got {:?}: {}",
            e.kind, e.message
        )),
    };
    report.record(
        "error",
        "a bad resource is refused with a structured error (invalidInput or rejected)",
        refused,
    );

    let timely = timeout_check(Arc::clone(&runtime), &sample.update);
    report.record(
        "timeout",
        "a call given a short timeout returns soon after it, failing if at all with `timeout`",
        timely,
    );

    let deleted = match runtime.delete(&delete(&sample.update)) {
        Err(e) => fail_with("delete", &e),
        Ok(()) => match live(runtime.as_ref(), &sample.update) {
            Ok(None) => Verdict::Passed,
            Ok(Some(_)) => Verdict::Failed("read still finds the object after delete".into()),
            Err(e) => fail_with("read after delete", &e),
        },
    };
    report.record(
        "delete",
        "delete removes the object and read answers absent",
        deleted,
    );

    let again = match runtime.delete(&delete(&sample.update)) {
        Ok(()) => Verdict::Passed,
        Err(e) => fail_with("the second delete", &e),
    };
    report.record("delete-absent", "deleting an absent object succeeds", again);
    report
}

fn describe_check(info: &kusion_sdk::runtime::RuntimeInfo, sample: &Sample) -> Verdict {
    if info.name.trim().is_empty() {
        return Verdict::Failed("the runtime has no name".into());
    }
    if !kusion_sdk::ABI_VERSION.accepts(info.abi) {
        return Verdict::Failed(format!(
            "the runtime speaks ABI {}, this kusion {}",
            info.abi,
            kusion_sdk::ABI_VERSION
        ));
    }
    for r in [&sample.create, &sample.update, &sample.invalid] {
        if !info.resource_types.contains(&r.resource_type) {
            return Verdict::Failed(format!(
                "the sample resource `{}` has type `{}`, which the runtime does not serve (it serves {})",
                r.id,
                r.resource_type,
                info.resource_types.join(", ")
            ));
        }
    }
    if sample.create.id != sample.update.id {
        return Verdict::Failed(format!(
            "the sample's `create` and `update` must have one ID, got `{}` and `{}`",
            sample.create.id, sample.update.id
        ));
    }
    Verdict::Passed
}

fn fail_with(what: &str, e: &kusion_sdk::PluginError) -> Verdict {
    Verdict::Failed(format!("{what} failed ({:?}): {}", e.kind, e.message))
}

fn apply(
    prior: Option<&Resource>,
    planned: &Resource,
    dry_run: bool,
    timeout: Option<Duration>,
) -> ApplyRequest {
    ApplyRequest {
        prior: prior.cloned(),
        prior_private: None,
        planned: planned.clone(),
        dry_run,
        timeout,
    }
}

fn delete(resource: &Resource) -> DeleteRequest {
    DeleteRequest {
        resource: resource.clone(),
        private: None,
        timeout: None,
    }
}

fn live(runtime: &dyn Runtime, resource: &Resource) -> PluginResult<Option<Resource>> {
    runtime
        .read(&ReadRequest {
            prior: Some(resource.clone()),
            prior_private: None,
            planned: Some(resource.clone()),
            timeout: None,
        })
        .map(|r| r.resource)
}

/// Apply `planned` (over `prior`), then read it back: every planned attribute must be there with
/// its planned value (a runtime may add computed ones).
fn applied_and_read(
    runtime: &dyn Runtime,
    prior: Option<&Resource>,
    planned: &Resource,
) -> Verdict {
    if let Err(e) = runtime.apply(&apply(prior, planned, false, None)) {
        return fail_with("apply", &e);
    }
    match live(runtime, planned) {
        Err(e) => fail_with("read after apply", &e),
        Ok(None) => Verdict::Failed("read answers absent after apply".into()),
        Ok(Some(found)) => {
            for (key, want) in &planned.attributes {
                let got = found.attributes.get(key);
                if got != Some(want) {
                    return Verdict::Failed(format!(
                        "attribute `{key}` reads back as {}, planned {want}",
                        got.map_or("nothing".to_string(), Value::to_string)
                    ));
                }
            }
            Verdict::Passed
        }
    }
}

fn watch_until_ready(runtime: &dyn Runtime, resource: &Resource, limit: Duration) -> Verdict {
    let mut watch = match runtime.watch(&WatchRequest {
        resource: resource.clone(),
    }) {
        Ok(w) => w,
        Err(e) => return fail_with("watch", &e),
    };
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Verdict::Failed(format!("no Ready event within {limit:?}"));
        }
        match watch.poll(left.min(Duration::from_secs(1))) {
            Ok(WatchPoll::Event(e)) if e.health == Health::Ready => return Verdict::Passed,
            Ok(WatchPoll::Event(e)) if e.health == Health::Failed => {
                return Verdict::Failed(format!("the watch reported Failed: {}", e.detail));
            }
            Ok(WatchPoll::Event(_)) | Ok(WatchPoll::Pending) => {}
            Ok(WatchPoll::Closed) => {
                return Verdict::Failed("the watch closed without a Ready event".into());
            }
            Err(e) => return fail_with("watch poll", &e),
        }
    }
}

/// A read given [`SHORT_TIMEOUT`] must come back within [`TIMEOUT_GRACE`] of it, with an answer
/// or a `timeout` error. It runs on its own thread so a runtime that ignores the timeout is
/// reported rather than hanging the suite.
fn timeout_check(runtime: Arc<dyn Runtime>, resource: &Resource) -> Verdict {
    let (tx, rx) = mpsc::channel();
    let request = ReadRequest {
        prior: Some(resource.clone()),
        prior_private: None,
        planned: Some(resource.clone()),
        timeout: Some(SHORT_TIMEOUT),
    };
    let spawned = std::thread::Builder::new()
        .name("conformance-timeout".into())
        .spawn(move || {
            let _ = tx.send(runtime.read(&request));
        });
    if let Err(e) = spawned {
        return Verdict::Failed(format!("cannot start the check's thread: {e}"));
    }
    match rx.recv_timeout(SHORT_TIMEOUT + TIMEOUT_GRACE) {
        Ok(Ok(_)) => Verdict::Passed,
        Ok(Err(e)) if e.kind == ErrorKind::Timeout => Verdict::Passed,
        Ok(Err(e)) => Verdict::Failed(format!(
            "a read with a {SHORT_TIMEOUT:?} timeout failed with {:?} rather than timeout: {}",
            e.kind, e.message
        )),
        Err(_) => Verdict::Failed(format!(
            "a read with a {SHORT_TIMEOUT:?} timeout had not returned after {:?}",
            SHORT_TIMEOUT + TIMEOUT_GRACE
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use kusion_sdk::runtime::*;
    use kusion_sdk::{PluginError, PluginResult};
    use serde_json::json;

    use super::*;

    /// What an in-memory runtime gets wrong on purpose.
    #[derive(Default, Clone, Copy)]
    struct Faults {
        absent_is_error: bool,
        accepts_invalid: bool,
        ignores_timeout: bool,
        delete_absent_fails: bool,
    }

    #[derive(Default)]
    struct Memory {
        objects: Mutex<BTreeMap<String, Resource>>,
        faults: Faults,
    }

    impl Runtime for Memory {
        fn describe(&self) -> RuntimeInfo {
            RuntimeInfo {
                name: "memory".into(),
                version: "0".into(),
                abi: kusion_sdk::ABI_VERSION,
                resource_types: vec!["Mem".into()],
                capabilities: Capabilities::default(),
            }
        }
        fn configure(&self, _: &Value) -> PluginResult<()> {
            Ok(())
        }
        fn apply(&self, r: &ApplyRequest) -> PluginResult<ApplyResponse> {
            if r.planned.attributes.contains_key("bad") && !self.faults.accepts_invalid {
                return Err(PluginError::invalid("attribute `bad` is not allowed"));
            }
            if !r.dry_run {
                self.objects
                    .lock()
                    .unwrap()
                    .insert(r.planned.id.clone(), r.planned.clone());
            }
            Ok(ApplyResponse {
                resource: r.planned.clone(),
                private: None,
                sensitive_paths: vec![],
                unknown_paths: vec![],
                requires_replace: vec![],
            })
        }
        fn read(&self, r: &ReadRequest) -> PluginResult<ReadResponse> {
            if r.timeout.is_some() && self.faults.ignores_timeout {
                std::thread::sleep(TIMEOUT_GRACE * 2);
            }
            let like = r.prior.as_ref().or(r.planned.as_ref()).unwrap();
            let resource = self.objects.lock().unwrap().get(&like.id).cloned();
            if resource.is_none() && self.faults.absent_is_error {
                return Err(PluginError::new(ErrorKind::Unavailable, "not found"));
            }
            Ok(ReadResponse {
                resource,
                ..Default::default()
            })
        }
        fn import(&self, _: &ImportRequest) -> PluginResult<ReadResponse> {
            Err(PluginError::unsupported("no import"))
        }
        fn delete(&self, r: &DeleteRequest) -> PluginResult<()> {
            let removed = self.objects.lock().unwrap().remove(&r.resource.id);
            if removed.is_none() && self.faults.delete_absent_fails {
                return Err(PluginError::new(ErrorKind::Rejected, "no such object"));
            }
            Ok(())
        }
        fn watch(&self, _: &WatchRequest) -> PluginResult<Box<dyn Watch>> {
            Err(PluginError::unsupported("no watch"))
        }
    }

    fn sample() -> Sample {
        let mem = |attrs: Value| {
            Resource::new("m:1", "Mem", attrs.as_object().cloned().unwrap_or_default())
        };
        Sample {
            config: Value::Null,
            create: mem(json!({"v": 1})),
            update: mem(json!({"v": 2})),
            invalid: mem(json!({"bad": true})),
            watch_timeout: Duration::from_secs(1),
        }
    }

    fn verdicts(report: &Report) -> Vec<(&str, &Verdict)> {
        report.checks.iter().map(|c| (c.name, &c.verdict)).collect()
    }

    fn failed(report: &Report) -> Vec<&str> {
        report
            .checks
            .iter()
            .filter(|c| matches!(c.verdict, Verdict::Failed(_)))
            .map(|c| c.name)
            .collect()
    }

    #[test]
    fn a_conforming_runtime_passes_and_undeclared_capabilities_are_skipped() {
        let report = run(Arc::new(Memory::default()), &sample());
        assert!(report.passed(), "{report:#?}");
        let names: Vec<&str> = report.checks.iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "describe",
                "absent",
                "dry-run",
                "create",
                "update",
                "import",
                "watch",
                "error",
                "timeout",
                "delete",
                "delete-absent"
            ]
        );
        for skipped in ["dry-run", "import", "watch"] {
            let (_, verdict) = verdicts(&report)
                .into_iter()
                .find(|(n, _)| *n == skipped)
                .unwrap();
            assert!(
                matches!(verdict, Verdict::Skipped(_)),
                "{skipped}: {verdict:?}"
            );
        }
    }

    #[test]
    fn each_broken_promise_fails_its_own_check_with_the_reason() {
        let runtime = Memory {
            faults: Faults {
                accepts_invalid: true,
                ignores_timeout: true,
                delete_absent_fails: true,
                ..Faults::default()
            },
            ..Memory::default()
        };
        let report = run(Arc::new(runtime), &sample());
        assert!(!report.passed());
        assert_eq!(
            failed(&report),
            ["error", "timeout", "delete-absent"],
            "{report:#?}"
        );
        let reasons: Vec<String> = report
            .checks
            .iter()
            .filter_map(|c| match &c.verdict {
                Verdict::Failed(why) => Some(why.clone()),
                _ => None,
            })
            .collect();
        assert!(reasons[0].contains("`m:1` was accepted"), "{reasons:?}");
        assert!(reasons[1].contains("had not returned"), "{reasons:?}");
        assert!(reasons[2].contains("no such object"), "{reasons:?}");
    }

    #[test]
    fn absent_as_an_error_fails_and_stops_the_suite_before_it_writes() {
        let runtime = Arc::new(Memory {
            faults: Faults {
                absent_is_error: true,
                ..Faults::default()
            },
            ..Memory::default()
        });
        let report = run(runtime.clone(), &sample());
        assert_eq!(failed(&report), ["absent"], "{report:#?}");
        assert_eq!(report.checks.len(), 2);
        assert!(runtime.objects.lock().unwrap().is_empty());
    }

    #[test]
    fn a_sample_of_a_type_the_runtime_does_not_serve_is_named() {
        let mut sample = sample();
        sample.invalid.resource_type = "Other".into();
        let report = run(Arc::new(Memory::default()), &sample);
        match &report.checks[0].verdict {
            Verdict::Failed(why) => assert!(why.contains("type `Other`"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(report.checks.len(), 1);
    }
}
