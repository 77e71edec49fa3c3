//! Unit tests of the Kubernetes runtime (`lib.rs`).

use super::*;
use serde_json::json;

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[test]
fn a_read_answers_the_dry_run_only_when_nothing_would_change() {
    let planned = map(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n"}, "data": {"a": "1"}}));
    let body = Value::Object(planned.clone());
    // Absent: the plan is the answer.
    assert_eq!(
        answer_from_read(None, &planned, &body, None, "kusion"),
        Some(planned.clone())
    );
    // Live with the same values, plus server metadata and a label kusion does not manage.
    let owned = |keys: &[&str]| {
        let data: Map<String, Value> = keys.iter().map(|k| (format!("f:{k}"), json!({}))).collect();
        json!([{"manager": "kusion", "operation": "Apply", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": data}},
               {"manager": "other", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {"f:other": {}}}}}])
    };
    let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "n", "uid": "u", "resourceVersion": "9",
                     "labels": {"other": "x"}, "managedFields": owned(&["a"])},
        "data": {"a": "1"}});
    assert_eq!(
        answer_from_read(Some(&live), &planned, &body, None, "kusion"),
        Some(planned.clone())
    );
    // A value that differs needs the server.
    let mut drifted = live.clone();
    drifted["data"]["a"] = json!("2");
    assert_eq!(
        answer_from_read(Some(&drifted), &planned, &body, None, "kusion"),
        None
    );
    // A field kusion's manager owns and the plan drops would be removed: the server says
    // how, whatever state recorded.
    let mut with_gone = live.clone();
    with_gone["data"]["gone"] = json!("y");
    with_gone["metadata"]["managedFields"] = owned(&["a", "gone"]);
    assert_eq!(
        answer_from_read(Some(&with_gone), &planned, &body, None, "kusion"),
        None
    );
    // The same key owned by another manager only stays: nothing changes.
    let mut theirs = with_gone.clone();
    theirs["metadata"]["managedFields"] = owned(&["a"]);
    assert!(answer_from_read(Some(&theirs), &planned, &body, None, "kusion").is_some());
    // A key recorded in the prior state (kusion's earlier value) shows on both sides.
    let prior = json!({"data": {"a": "1", "gone": "y"}});
    assert_eq!(
        answer_from_read(Some(&theirs), &planned, &body, Some(&prior), "kusion"),
        None
    );
}
