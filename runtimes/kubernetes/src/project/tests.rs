//! Unit tests of `project`.

use super::*;
use serde_json::json;

#[test]
fn server_defaults_and_metadata_vanish() {
    let live = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "s", "namespace": "n", "uid": "u", "resourceVersion": "7",
                     "labels": {"a": "1", "other": "x"}, "managedFields": []},
        "spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 9, "protocol": "TCP"}],
                 "clusterIP": "10.0.0.5", "type": "ClusterIP", "sessionAffinity": "None"},
        "status": {"loadBalancer": {}}
    });
    let shape = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n", "labels": {"a": "1"}},
                       "spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let p = Value::Object(project_object(&live, &shape));
    assert_eq!(p, shape);
}

#[test]
fn changed_managed_fields_show() {
    let live = json!({"kind": "Deployment", "spec": {"replicas": 5, "template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:2", "imagePullPolicy": "IfNotPresent"}]}}}});
    let shape = json!({"kind": "Deployment", "spec": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:1"}]}}}});
    let p = Value::Object(project_object(&live, &shape));
    assert_eq!(
        p,
        json!({"kind": "Deployment", "spec": {"replicas": 5, "template": {"spec": {"containers": [
        {"name": "c", "image": "nginx:2"}]}}}})
    );
    // A declared field that is gone live is missing from the projection.
    let live = json!({"kind": "ConfigMap", "data": {"a": "1"}});
    let shape = json!({"kind": "ConfigMap", "data": {"a": "1", "b": "2"}});
    assert_eq!(
        Value::Object(project_object(&live, &shape)),
        json!({"kind": "ConfigMap", "data": {"a": "1"}})
    );
}

#[test]
fn quantities_and_secrets_compare_by_value() {
    let live = json!({"kind": "Pod", "spec": {"cpu": "500m", "mem": "1Gi", "n": 1}});
    let shape = json!({"kind": "Pod", "spec": {"cpu": "0.5", "mem": "1024Mi", "n": 1.0}});
    assert_eq!(Value::Object(project_object(&live, &shape)), shape);
    assert!(!quantities_equal("500m", "0.6"));
    assert!(!quantities_equal("abc", "abc2"));
    let live = json!({"kind": "Secret", "data": {"pw": "aHVudGVyMg=="}, "type": "Opaque"});
    let shape = json!({"kind": "Secret", "stringData": {"pw": "hunter2"}});
    assert_eq!(Value::Object(project_object(&live, &shape)), shape);
    let shape_changed = json!({"kind": "Secret", "stringData": {"pw": "other"}});
    assert_eq!(Value::Object(project_object(&live, &shape_changed)), shape);
}

#[test]
fn prior_keeps_dropped_fields_visible() {
    let planned = json!({"metadata": {"labels": {"a": "1"}}});
    let prior = json!({"metadata": {"labels": {"a": "1", "gone": "x"}}});
    let live = json!({"metadata": {"labels": {"a": "1", "gone": "x", "foreign": "y"}}});
    let guide = Guide {
        planned: Some(&planned),
        prior: Some(&prior),
        owned: None,
    };
    let p = project_guided(&live, guide, &Hints::default());
    assert_eq!(Value::Object(p), prior);
}

/// A Deployment kusion applied with two containers (each with env), as the server records
/// kusion's ownership of it.
fn two_containers() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "managedFields": [
            {"manager": "kusion", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1":
                {"f:spec": {"f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"main\"}": {".": {}, "f:name": {}, "f:image": {},
                        "f:env": {"k:{\"name\":\"A\"}": {".": {}, "f:name": {}, "f:value": {}},
                                  "k:{\"name\":\"B\"}": {".": {}, "f:name": {}, "f:value": {}}}},
                    "k:{\"name\":\"side\"}": {".": {}, "f:name": {}, "f:image": {}}},
                    "f:tolerations": {}}}}}},
            {"manager": "kube-controller-manager", "operation": "Update", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:status": {"f:replicas": {}}}}]},
        "spec": {"template": {"spec": {
            "containers": [
                {"name": "main", "image": "app:1", "imagePullPolicy": "IfNotPresent",
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                {"name": "side", "image": "proxy:1", "imagePullPolicy": "IfNotPresent"}],
            "tolerations": [{"key": "x", "operator": "Exists"}, {"key": "y", "operator": "Exists"}]}}},
        "status": {"replicas": 1}})
}

#[test]
fn removals_of_owned_items_stay_visible_and_are_detected() {
    let live = two_containers();
    // The new spec drops the sidecar, env var B and toleration y.
    let planned = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {
            "containers": [{"name": "main", "image": "app:1", "env": [{"name": "A", "value": "1"}]}],
            "tolerations": [{"key": "x", "operator": "Exists"}]}}}});
    let owned = owned_fields(&live, "kusion").expect("kusion's entry");
    assert!(
        !keeps_owned(&planned, owned),
        "the apply removes owned items"
    );
    let hints = Hints::from_objects([&live]);
    assert_eq!(
        hints.get(&["spec", "template", "spec", "containers"].map(String::from)),
        Some(&ListKind::Map(vec!["name".into()]))
    );
    assert_eq!(
        hints.get(&["spec", "template", "spec", "tolerations"].map(String::from)),
        Some(&ListKind::Atomic)
    );
    let guide = Guide {
        planned: Some(&planned),
        prior: None,
        owned: Some(owned),
    };
    let seen = Value::Object(project_guided(&live, guide, &hints));
    // Everything kusion owns is there, nothing the server defaulted.
    assert_eq!(
        seen["spec"]["template"]["spec"],
        json!({"containers": [
            {"name": "main", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "side", "image": "proxy:1"}],
            "tolerations": [{"key": "x", "operator": "Exists"}, {"key": "y", "operator": "Exists"}]})
    );
    // Without the owned fields, the removals would be invisible: the old bug.
    let blind = Value::Object(project_object(&live, &planned));
    assert_eq!(
        blind["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // The same spec as applied keeps everything owned.
    let same = json!({"spec": {"template": {"spec": {
        "containers": [{"name": "main", "image": "app:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                       {"name": "side", "image": "proxy:1"}],
        "tolerations": [{"key": "x", "operator": "Exists"}]}}}});
    assert!(keeps_owned(&same, owned));
}

#[test]
fn sets_and_positional_entries_are_understood() {
    let owned = json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}},
                       "f:spec": {"f:list": {"i:0": {"f:x": {}}}}});
    let owned = owned.as_object().unwrap();
    assert!(keeps_owned(
        &json!({"metadata": {"finalizers": ["b", "a"]}, "spec": {"list": [{"x": 1}]}}),
        owned
    ));
    assert!(!keeps_owned(
        &json!({"metadata": {"finalizers": ["a"]}, "spec": {"list": [{"x": 1}]}}),
        owned
    ));
    assert!(!keeps_owned(
        &json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"list": []}}),
        owned
    ));
    assert!(!keeps_owned(
        &json!({"spec": {"odd": 1}}),
        &json!({"z:x": {}}).as_object().unwrap().clone()
    ));
}

#[test]
fn ports_without_protocol_match_their_defaulted_items() {
    let live = json!({"spec": {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080},
                                          {"port": 80, "protocol": "UDP", "targetPort": 8080}]}});
    let planned = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let mut hints = Hints::default();
    hints.insert(
        &["spec".into(), "ports".into()],
        ListKind::Map(vec!["port".into(), "protocol".into()]),
        true,
    );
    let guide = Guide {
        planned: Some(&planned),
        ..Guide::default()
    };
    assert_eq!(Value::Object(project_guided(&live, guide, &hints)), planned);
}
