//! The spec: the desired resources of a stack.

use std::collections::BTreeSet;
use std::path::Path;

use kusion_sdk::Resource;
use serde::{Deserialize, Serialize};

use crate::id::{IdError, check_resource_id};

/// A stack's desired resources, in upstream's format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// The resources, in the order written.
    pub resources: Vec<Resource>,
}

/// Everything that can be wrong with a spec. Every variant names the resource or file concerned.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The text is not valid YAML or JSON.
    #[error("{file}:{line}:{column}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The file could not be read.
    #[error("{file}: {message}")]
    Io {
        /// The file.
        file: String,
        /// The system's message.
        message: String,
    },
    /// Two resources share an ID (in one target).
    #[error("duplicate resource ID {id:?} (resources #{first} and #{second}{})", .target.as_ref().map(|t| format!(", both in target {t:?}")).unwrap_or_default())]
    Duplicate {
        /// The ID.
        id: String,
        /// The first resource's index.
        first: usize,
        /// The second resource's index.
        second: usize,
        /// The target both live in (an ID may occur once per target).
        target: Option<String>,
    },
    /// A resource's type is not one a runtime serves.
    #[error("resource {id:?}: unknown type {resource_type:?} (known: {known})")]
    UnknownType {
        /// The resource.
        id: String,
        /// Its type.
        resource_type: String,
        /// The types served.
        known: String,
    },
    /// A resource ID is malformed.
    #[error(transparent)]
    Id(#[from] IdError),
    /// `dependsOn` names a resource the spec does not have.
    #[error("resource {id:?}: dependsOn names {dependency:?}, which is not in the spec")]
    MissingDependency {
        /// The resource.
        id: String,
        /// The ID it names.
        dependency: String,
    },
    /// A resource depends on itself.
    #[error("resource {id:?} depends on itself")]
    SelfDependency {
        /// The resource.
        id: String,
    },
    /// A key the spec format does not have.
    #[error("{0}")]
    UnknownKey(Box<UnknownKey>),
}

/// A key a spec may not have (boxed in [`SpecError`] to keep errors small).
#[derive(Debug)]
pub struct UnknownKey {
    /// The file.
    pub file: String,
    /// The line of the key, when it can be found in the text.
    pub line: Option<usize>,
    /// The key.
    pub key: String,
    /// Where: `in resource #3 ("v1:Service:ns:web")` or `at the top level`.
    pub place: String,
    /// The known key closest to it (a likely typo).
    pub closest: Option<String>,
    /// The keys allowed there.
    pub known: String,
}

impl std::fmt::Display for UnknownKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": unknown key {:?} {}", self.key, self.place)?;
        match &self.closest {
            Some(c) => write!(f, "; did you mean {c:?}?"),
            None => write!(f, "; known keys: {}", self.known),
        }
    }
}

/// Keys of a spec document and of each resource; anything else is a mistake (a misspelled
/// `dependsOn` would silently lose an ordering).
const TOP_KEYS: &[&str] = &["resources"];
const RESOURCE_KEYS: &[&str] = &["id", "type", "attributes", "dependsOn", "extensions"];

/// The known key closest to `key`, if it is close enough to be a likely misspelling.
fn closest(key: &str, known: &[&str]) -> Option<String> {
    known
        .iter()
        .map(|k| {
            (
                strsim::damerau_levenshtein(&key.to_ascii_lowercase(), &k.to_ascii_lowercase()),
                k,
            )
        })
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.to_string())
}

/// The 1-based line of the first line that starts (after indentation and `- `) with `key:`.
fn line_of_key(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let l = l.trim_start().trim_start_matches("- ").trim_start();
            let l = l.trim_start_matches(['"', '\'']);
            l.strip_prefix(key).is_some_and(|rest| {
                rest.trim_start_matches(['"', '\''])
                    .trim_start()
                    .starts_with(':')
            })
        })
        .map(|i| i + 1)
}

/// Refuse unknown keys at the top level and in each resource.
fn check_keys<'a>(
    text: &str,
    file: &str,
    top: impl Iterator<Item = Option<&'a str>>,
    resources: impl Iterator<Item = (Option<&'a str>, Vec<Option<&'a str>>)>,
) -> Result<(), SpecError> {
    let unknown = |key: &str, place: String, known: &[&str]| {
        SpecError::UnknownKey(Box::new(UnknownKey {
            file: file.to_string(),
            line: line_of_key(text, key),
            key: key.to_string(),
            place,
            closest: closest(key, known),
            known: known.join(", "),
        }))
    };
    for key in top {
        let key = key.unwrap_or("(not a string)");
        if !TOP_KEYS.contains(&key) {
            return Err(unknown(key, "at the top level".into(), TOP_KEYS));
        }
    }
    for (i, (id, keys)) in resources.enumerate() {
        for key in keys {
            let key = key.unwrap_or("(not a string)");
            if !RESOURCE_KEYS.contains(&key) {
                let place = match id {
                    Some(id) => format!("in resource #{} ({id:?})", i + 1),
                    None => format!("in resource #{}", i + 1),
                };
                return Err(unknown(key, place, RESOURCE_KEYS));
            }
        }
    }
    Ok(())
}

/// Deepest `[`/`{` nesting allowed in YAML flow style: deeper input is refused before the
/// parser sees it (its cost grows with the square of the depth).
const MAX_FLOW_DEPTH: usize = 256;

/// Find flow nesting deeper than [`MAX_FLOW_DEPTH`] in one linear pass (quoted scalars and
/// comments skipped); returns its line and column.
fn too_deep(text: &str) -> Option<(usize, usize)> {
    let (mut depth, mut line, mut col) = (0usize, 1usize, 0usize);
    let mut chars = text.chars().peekable();
    let mut quote: Option<char> = None;
    let mut at_line_start_or_space = true;
    while let Some(c) = chars.next() {
        col += 1;
        if c == '\n' {
            line += 1;
            col = 0;
            at_line_start_or_space = true;
            continue;
        }
        match quote {
            Some('"') if c == '\\' => {
                chars.next();
                col += 1;
            }
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None => match c {
                '"' | '\'' => quote = Some(c),
                '#' if at_line_start_or_space => {
                    // A comment runs to the end of the line.
                    while chars.peek().is_some_and(|c| *c != '\n') {
                        chars.next();
                    }
                }
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_FLOW_DEPTH {
                        return Some((line, col));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        at_line_start_or_space = c.is_whitespace();
    }
    None
}

/// The two accepted document shapes: `resources: [...]` or a bare list.
#[derive(Deserialize)]
#[serde(untagged)]
enum SpecDocument {
    Wrapped(Spec),
    Bare(Vec<Resource>),
}

impl Spec {
    /// Parse a spec from YAML or JSON text; `file` is used in error messages.
    pub fn parse(text: &str, file: &str) -> Result<Spec, SpecError> {
        let trimmed = text.trim_start();
        let document: SpecDocument = if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let value: serde_json::Value =
                serde_json::from_str(text).map_err(|e| SpecError::Syntax {
                    file: file.to_string(),
                    line: e.line(),
                    column: e.column(),
                    message: e.to_string(),
                })?;
            let resources = match &value {
                serde_json::Value::Object(top) => top.get("resources"),
                list @ serde_json::Value::Array(_) => Some(list),
                _ => None,
            };
            check_keys(
                text,
                file,
                value
                    .as_object()
                    .into_iter()
                    .flat_map(|m| m.keys().map(|k| Some(k.as_str()))),
                resources
                    .and_then(serde_json::Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(serde_json::Value::as_object)
                    .map(|r| {
                        (
                            r.get("id").and_then(serde_json::Value::as_str),
                            r.keys().map(|k| Some(k.as_str())).collect(),
                        )
                    }),
            )?;
            serde_json::from_value(value).map_err(|e| SpecError::Syntax {
                file: file.to_string(),
                line: 0,
                column: 0,
                message: format!("not a spec (expected `resources:` with a list of {{id, type, attributes}}): {e}"),
            })?
        } else {
            if let Some((line, column)) = too_deep(text) {
                return Err(SpecError::Syntax {
                    file: file.to_string(),
                    line,
                    column,
                    message: format!("flow collections nested deeper than {MAX_FLOW_DEPTH} levels"),
                });
            }
            // Parse to a generic value first so structural errors carry a location.
            let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).map_err(|e| {
                let (line, column) = e.location().map_or((0, 0), |l| (l.line(), l.column()));
                SpecError::Syntax {
                    file: file.to_string(),
                    line,
                    column,
                    message: e.to_string(),
                }
            })?;
            if value.is_null() {
                return Ok(Spec::default());
            }
            let resources = match &value {
                serde_yaml_ng::Value::Mapping(top) => top.get("resources"),
                list @ serde_yaml_ng::Value::Sequence(_) => Some(list),
                _ => None,
            };
            check_keys(
                text,
                file,
                value
                    .as_mapping()
                    .into_iter()
                    .flat_map(|m| m.keys().map(serde_yaml_ng::Value::as_str)),
                resources
                    .and_then(serde_yaml_ng::Value::as_sequence)
                    .into_iter()
                    .flatten()
                    .filter_map(serde_yaml_ng::Value::as_mapping)
                    .map(|r| {
                        (
                            r.get("id").and_then(serde_yaml_ng::Value::as_str),
                            r.keys().map(serde_yaml_ng::Value::as_str).collect(),
                        )
                    }),
            )?;
            serde_yaml_ng::from_value(value).map_err(|e| SpecError::Syntax {
                file: file.to_string(),
                line: 0,
                column: 0,
                message: format!("not a spec (expected `resources:` with a list of {{id, type, attributes}}): {e}"),
            })?
        };
        Ok(match document {
            SpecDocument::Wrapped(spec) => spec,
            SpecDocument::Bare(resources) => Spec { resources },
        })
    }

    /// Read a spec file (YAML or JSON).
    pub fn read_file(path: &Path) -> Result<Spec, SpecError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SpecError::Io {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Spec::parse(&text, &file)
    }

    /// The spec as YAML.
    pub fn to_yaml(&self) -> String {
        serde_yaml_ng::to_string(self).expect("a spec is always representable as YAML")
    }

    /// The spec as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a spec is always representable as JSON")
    }

    /// Check IDs, duplicates, types and explicit dependencies. `known_types` are the resource
    /// types served by the registered runtimes.
    pub fn validate(&self, known_types: &BTreeSet<String>) -> Result<(), SpecError> {
        self.validate_targeted(known_types, &[])
    }

    /// [`Spec::validate`] where resource `i` lives in `targets[i]` (see
    /// `kusion_sdk::runtime::Runtime::target`; an empty slice means no targets): an ID may occur
    /// once per target.
    pub fn validate_targeted(
        &self,
        known_types: &BTreeSet<String>,
        targets: &[Option<String>],
    ) -> Result<(), SpecError> {
        let target = |i: usize| targets.get(i).and_then(|t| t.as_deref());
        let mut seen: rustc_hash::FxHashMap<(&str, Option<&str>), usize> =
            rustc_hash::FxHashMap::with_capacity_and_hasher(
                self.resources.len(),
                Default::default(),
            );
        let id_checks = crate::par::map(&self.resources, check_resource_id);
        for (index, (resource, id_check)) in self.resources.iter().zip(id_checks).enumerate() {
            if let Some(first) = seen.insert((resource.id.as_str(), target(index)), index) {
                return Err(SpecError::Duplicate {
                    id: resource.id.clone(),
                    first,
                    second: index,
                    target: target(index).map(str::to_string),
                });
            }
            if !known_types.contains(&resource.resource_type) {
                return Err(SpecError::UnknownType {
                    id: resource.id.clone(),
                    resource_type: resource.resource_type.clone(),
                    known: known_types.iter().cloned().collect::<Vec<_>>().join(", "),
                });
            }
            id_check?;
        }
        let ids: std::collections::HashSet<&str> = if targets.is_empty() {
            Default::default()
        } else {
            self.resources.iter().map(|r| r.id.as_str()).collect()
        };
        for resource in &self.resources {
            for dependency in &resource.depends_on {
                if dependency == &resource.id {
                    return Err(SpecError::SelfDependency {
                        id: resource.id.clone(),
                    });
                }
                let known = if targets.is_empty() {
                    seen.contains_key(&(dependency.as_str(), None))
                } else {
                    ids.contains(dependency.as_str())
                };
                if !known {
                    return Err(SpecError::MissingDependency {
                        id: resource.id.clone(),
                        dependency: dependency.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The resource with ID `id`.
    pub fn get(&self, id: &str) -> Option<&Resource> {
        self.resources.iter().find(|r| r.id == id)
    }
}

/// Parse YAML (or JSON) text into a JSON value (for configuration files).
pub fn yaml_to_json(text: &str) -> Result<serde_json::Value, serde_yaml_ng::Error> {
    serde_yaml_ng::from_str(text)
}

/// Render a JSON value as YAML for people.
pub fn json_to_yaml(value: &serde_json::Value) -> String {
    serde_yaml_ng::to_string(value).unwrap_or_else(|e| format!("# cannot render as YAML: {e}\n"))
}

#[cfg(test)]
mod tests {

    #[test]
    fn unknown_keys_are_errors_naming_the_closest_known_key() {
        let text =
            "resources:\n- id: t:a\n  type: Test\n- id: t:b\n  type: Test\n  dependOn: [t:a]\n";
        let e = Spec::parse(text, "spec.yaml").unwrap_err().to_string();
        assert!(
            e.contains("spec.yaml:6")
                && e.contains("\"dependOn\"")
                && e.contains("resource #2 (\"t:b\")")
                && e.contains("did you mean \"dependsOn\""),
            "{e}"
        );
        let e = Spec::parse("resource:\n- id: t:a\n  type: Test\n", "s.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean \"resources\""), "{e}");
        let e = Spec::parse(
            r#"{"resources": [{"id": "t:a", "type": "Test", "zzz": 1}]}"#,
            "s.json",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("\"zzz\"") && e.contains("known keys: id, type"),
            "{e}"
        );
        Spec::parse(
            "resources:\n- id: t:a\n  type: Test\n  dependsOn: []\n  extensions: {a: 1}\n",
            "ok.yaml",
        )
        .unwrap();
    }

    #[test]
    fn deep_flow_nesting_is_refused_in_linear_time() {
        let deep = format!("resources: {}{}", "[".repeat(100_000), "]".repeat(100_000));
        let started = std::time::Instant::now();
        let e = Spec::parse(&deep, "deep.yaml").unwrap_err().to_string();
        assert!(
            e.contains("deep.yaml:1:") && e.contains("nested deeper"),
            "{e}"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // Brackets inside quotes and comments do not count.
        let quoted = format!(
            "# {}\nresources: []\nx: '{}'\n",
            "[".repeat(1000),
            "{".repeat(1000)
        );
        assert!(too_deep(&quoted).is_none());
    }

    use super::*;

    fn types() -> BTreeSet<String> {
        ["Kubernetes", "Terraform", "Test"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    const SPEC: &str = r#"resources:
- id: v1:Namespace:demo
  type: Kubernetes
  attributes:
    apiVersion: v1
    kind: Namespace
    metadata:
      name: demo
- id: v1:ConfigMap:demo:cfg
  type: Kubernetes
  attributes:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: cfg
      namespace: demo
    data:
      z: '1'
      a: '2'
  dependsOn:
  - v1:Namespace:demo
  extensions:
    kusionstack.io/ignore: x
"#;

    #[test]
    fn yaml_round_trips_unchanged() {
        let spec = Spec::parse(SPEC, "spec.yaml").unwrap();
        assert_eq!(spec.resources.len(), 2);
        spec.validate(&types()).unwrap();
        assert_eq!(spec.to_yaml(), SPEC);
        let again = Spec::parse(&spec.to_json(), "spec.json").unwrap();
        assert_eq!(again, spec);
    }

    #[test]
    fn bare_list_is_accepted() {
        let bare = SPEC.replacen("resources:\n", "", 1);
        let spec = Spec::parse(&bare, "bare.yaml").unwrap();
        assert_eq!(spec.resources.len(), 2);
    }

    #[test]
    fn errors_name_the_resource_or_location() {
        let dup = format!(
            "{SPEC}{}",
            &SPEC["resources:\n".len()..SPEC.find("- id: v1:ConfigMap").unwrap()]
        );
        let e = Spec::parse(&dup, "s.yaml")
            .unwrap()
            .validate(&types())
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("duplicate resource ID \"v1:Namespace:demo\""),
            "{e}"
        );

        let unknown = SPEC.replacen("type: Kubernetes", "type: Helm", 1);
        let e = Spec::parse(&unknown, "s.yaml")
            .unwrap()
            .validate(&types())
            .unwrap_err();
        assert!(e.to_string().contains("unknown type \"Helm\""), "{e}");

        let e = Spec::parse("resources:\n- id: [\n", "broken.yaml").unwrap_err();
        assert!(e.to_string().starts_with("broken.yaml:"), "{e}");

        let missing = SPEC.replacen("  - v1:Namespace:demo", "  - v1:Namespace:other", 1);
        let e = Spec::parse(&missing, "s.yaml")
            .unwrap()
            .validate(&types())
            .unwrap_err();
        assert!(e.to_string().contains("v1:Namespace:other"), "{e}");
    }
}
