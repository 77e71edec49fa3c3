//! Whatever JSON a server sends back, projection and health judgement never panic, and
//! projecting an object onto its own shape changes nothing but server-owned fields.

use kusion_runtime_kubernetes::{evaluate_json, project_object};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "[a-zA-Z0-9 .:/=-]{0,12}".prop_map(Value::from),
        prop_oneof![
            Just("500m"),
            Just("0.5"),
            Just("1Gi"),
            Just("1e3"),
            Just("ImagePullBackOff"),
            Just("True")
        ]
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("status".to_string()),
                        Just("metadata".to_string()),
                        Just("spec".to_string()),
                        Just("conditions".to_string()),
                        Just("containerStatuses".to_string()),
                        Just("name".to_string()),
                        Just("data".to_string()),
                        Just("stringData".to_string()),
                        Just("kind".to_string()),
                        "[a-z]{1,6}",
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn projection_never_panics(live in arb_json(), shape in arb_json()) {
        let _ = project_object(&live, &shape);
    }

    #[test]
    fn self_projection_only_drops_server_fields(obj in arb_json()) {
        let mut obj = match obj { Value::Object(m) => Value::Object(m), other => json!({"spec": other}) };
        if let Some(m) = obj.as_object_mut() {
            // Secrets rebuild stringData from data; keep the property about plain objects.
            m.shift_remove("kind");
        }
        let projected = project_object(&obj, &obj);
        let mut expected = obj.as_object().cloned().unwrap_or_default();
        expected.shift_remove("status");
        if let Some(Value::Object(meta)) = expected.get_mut("metadata") {
            for k in ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink", "deletionTimestamp"] {
                meta.shift_remove(k);
            }
        }
        prop_assert_eq!(Value::Object(projected), Value::Object(expected));
    }

    #[test]
    fn health_never_panics(obj in arb_json()) {
        for (group, kind) in [("", "Pod"), ("apps", "Deployment"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"),
                              ("apps", "DaemonSet"), ("batch", "Job"), ("", "Namespace"), ("", "Service"),
                              ("", "PersistentVolumeClaim"), ("apiextensions.k8s.io", "CustomResourceDefinition")] {
            let _ = evaluate_json(group, kind, &obj);
        }
    }
}
