//! Rolling back: which earlier release to return to, and that release's spec as it was applied.
//!
//! A release keeps the spec it applied with sensitive values sealed as state seals them. With a
//! state key configured they are encrypted and come back here in clear; without one only a
//! keyed hash was kept, and the rollback stops, naming what must be supplied again, rather
//! than applying a hash as a password.

use kusion_sdk::Resource;
use serde_json::Value;

use crate::diff::MASK;
use crate::registry::Registry;
use crate::spec::Spec;
use crate::state::seal::{PREFIX, Sealer};
use crate::state::{Release, ReleaseStatus};

/// Why a release cannot be rolled back to.
#[derive(Debug, thiserror::Error)]
pub enum RollbackError {
    #[error(
        "no earlier successful apply to roll back to (`kusionctl state history` lists the releases)"
    )]
    /// No earlier release applied a spec successfully.
    NothingEarlier,
    /// The release named did not apply a spec.
    #[error(
        "release {revision} was {operation}, not an apply: only a release that applied a spec can be rolled back to"
    )]
    NotAnApply {
        /// The release.
        revision: u64,
        /// What it was (`destroy`, `import` ...).
        operation: String,
    },
    /// The release named did not succeed.
    #[error(
        "release {revision} did not succeed ({status}); roll back to one that did (`kusionctl state history`)"
    )]
    NotSucceeded {
        /// The release.
        revision: u64,
        /// How it ended.
        status: String,
    },
    /// Some of the release's resource types have no runtime now.
    #[error("release {revision} cannot be rolled back to: {}", list_types(.resources))]
    NoRuntime {
        /// The release.
        revision: u64,
        /// (resource ID, type) of every resource no loaded runtime serves.
        resources: Vec<(String, String)>,
    },
    #[error(
        "release {revision} kept only hashes of these secret values, so they cannot be restored:{}\nre-supply them by applying a spec that holds them, or set a state key (KUSION_STATE_PASSPHRASE, KUSION_STATE_KEY_FILE or KUSION_STATE_KMS_KEY_ID) so that later releases keep them encrypted",
        list_paths(.missing)
    )]
    /// The release kept only hashes of some secret values.
    SecretsMissing {
        /// The release.
        revision: u64,
        /// (resource ID, attribute paths) whose clear values were not kept.
        missing: Vec<(String, Vec<String>)>,
    },
}

fn list_types(resources: &[(String, String)]) -> String {
    resources
        .iter()
        .map(|(id, t)| format!("{id} has type {t:?}, which no loaded runtime serves"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn list_paths(missing: &[(String, Vec<String>)]) -> String {
    missing
        .iter()
        .map(|(id, paths)| format!("\n  {id}: {}", paths.join(", ")))
        .collect()
}

/// Operations whose release applied a spec (and so can be returned to).
fn applies_spec(operation: &str) -> bool {
    matches!(operation, "apply" | "rollback")
}

fn changes_stack(operation: &str) -> bool {
    applies_spec(operation) || operation == "destroy"
}

/// The release `rollback` returns to without `--to`: the latest successful apply (or rollback)
/// before the latest release that changed the stack, whatever that one's outcome. After a good
/// apply this is the one before it; after a failed apply it is the last good one.
pub fn default_revision(releases: &[Release]) -> Result<u64, RollbackError> {
    let current = releases
        .iter()
        .filter(|r| changes_stack(&r.operation))
        .map(|r| r.revision)
        .max()
        .ok_or(RollbackError::NothingEarlier)?;
    releases
        .iter()
        .filter(|r| {
            r.revision < current
                && applies_spec(&r.operation)
                && r.status == ReleaseStatus::Succeeded
        })
        .map(|r| r.revision)
        .max()
        .ok_or(RollbackError::NothingEarlier)
}

/// The spec `release` applied, with its sealed values restored, checked for what a rollback
/// needs: an apply that succeeded, a runtime for every resource type, every secret in clear.
pub fn restore_spec(
    release: &Release,
    sealer: &Sealer,
    registry: &Registry,
) -> Result<Spec, RollbackError> {
    if !applies_spec(&release.operation) {
        return Err(RollbackError::NotAnApply {
            revision: release.revision,
            operation: release.operation.clone(),
        });
    }
    if release.status != ReleaseStatus::Succeeded {
        return Err(RollbackError::NotSucceeded {
            revision: release.revision,
            status: format!("{:?}", release.status).to_lowercase(),
        });
    }
    let unserved: Vec<(String, String)> = release
        .spec
        .resources
        .iter()
        .filter(|r| registry.get(&r.resource_type).is_none())
        .map(|r| (r.id.clone(), r.resource_type.clone()))
        .collect();
    if !unserved.is_empty() {
        return Err(RollbackError::NoRuntime {
            revision: release.revision,
            resources: unserved,
        });
    }
    let mut spec = release.spec.clone();
    let mut missing = Vec::new();
    for resource in &mut spec.resources {
        let paths = unseal_resource(resource, sealer);
        if !paths.is_empty() {
            missing.push((resource.id.clone(), paths));
        }
    }
    if !missing.is_empty() {
        return Err(RollbackError::SecretsMissing {
            revision: release.revision,
            missing,
        });
    }
    Ok(spec)
}

/// Restore `resource`'s sealed values in place; returns the paths of those that stay unknown
/// (hashes, or the mask releases recorded before values were sealed).
fn unseal_resource(resource: &mut Resource, sealer: &Sealer) -> Vec<String> {
    let mut missing = Vec::new();
    for (key, value) in resource.attributes.iter_mut() {
        let mut path = key.clone();
        unseal_value(value, sealer, &mut path, &mut missing);
    }
    missing
}

fn unseal_value(value: &mut Value, sealer: &Sealer, path: &mut String, missing: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let len = path.len();
                path.push('.');
                path.push_str(k);
                unseal_value(v, sealer, path, missing);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                unseal_value(v, sealer, path, missing);
                path.truncate(len);
            }
        }
        Value::String(s) if s.starts_with(PREFIX) => match sealer.unseal(s) {
            Some(clear) => *value = clear,
            None => missing.push(path.clone()),
        },
        Value::String(s) if s == MASK => missing.push(path.clone()),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::LeaseHolder;

    fn release(revision: u64, operation: &str, status: ReleaseStatus) -> Release {
        Release {
            revision,
            operation: operation.into(),
            holder: LeaseHolder::current(operation),
            started_at: revision,
            finished_at: Some(revision),
            status,
            spec: Spec::default(),
            steps: vec![],
            notes: vec![],
            rollback_of: None,
        }
    }

    #[test]
    fn the_default_is_the_last_good_apply_before_the_latest_change() {
        use ReleaseStatus::*;
        let good = |n| release(n, "apply", Succeeded);
        // After a good apply: the one before it.
        assert_eq!(default_revision(&[good(1), good(2), good(3)]).unwrap(), 2);
        // After a failed apply: the last good one.
        let failed = release(4, "apply", Failed);
        assert_eq!(
            default_revision(&[good(1), good(2), good(3), failed]).unwrap(),
            3
        );
        // Imports and state edits are not changes of the spec and are skipped.
        let import = release(3, "import", Succeeded);
        assert_eq!(default_revision(&[good(1), good(2), import]).unwrap(), 1);
        // A rollback is an apply of a spec: undoing it returns to where it came from.
        let rollback = release(4, "rollback", Succeeded);
        assert_eq!(
            default_revision(&[good(1), good(2), good(3), rollback]).unwrap(),
            3
        );
        assert!(matches!(
            default_revision(&[good(1)]),
            Err(RollbackError::NothingEarlier)
        ));
        assert!(matches!(
            default_revision(&[]),
            Err(RollbackError::NothingEarlier)
        ));
    }

    #[test]
    fn sealed_values_come_back_only_with_the_key() {
        let key = crate::state::seal::KeySource::Passphrase("correct horse".into());
        let state = crate::state::State::default();
        let with_key = Sealer::for_state(&state, Some(&key)).unwrap();
        let mut resource: Resource = serde_json::from_value(serde_json::json!({
            "id": "v1:Secret:default:db",
            "type": "Kubernetes",
            "attributes": {"data": {"password": "hunter2"}, "items": [{"token": "t"}]}
        }))
        .unwrap();
        with_key.seal_resource(
            &mut resource,
            &["data.password".to_string(), "items".to_string()],
        );
        let sealed = resource.clone();
        assert!(
            resource.attributes["data"]["password"]
                .as_str()
                .unwrap()
                .starts_with(PREFIX)
        );
        assert!(unseal_resource(&mut resource, &with_key).is_empty());
        assert_eq!(resource.attributes["data"]["password"], "hunter2");
        assert_eq!(resource.attributes["items"][0]["token"], "t");

        // The same stack without the key: hashes only, named by path.
        let without = Sealer::for_state(&state, None).unwrap();
        let mut hashed = sealed;
        let missing = unseal_resource(&mut hashed, &without);
        assert_eq!(missing, vec!["data.password", "items[0].token"]);
    }
}
