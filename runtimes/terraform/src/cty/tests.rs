//! Unit tests of `cty`.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn attr(ty: Type) -> Attribute {
    Attribute {
        ty,
        nested: None,
        required: false,
        optional: true,
        computed: false,
        sensitive: false,
    }
}

fn sample_block() -> Block {
    let mut inner = Block::default();
    inner.attributes.insert("port".into(), attr(Type::Number));
    inner.attributes.insert(
        "secret".into(),
        Attribute {
            sensitive: true,
            ..attr(Type::String)
        },
    );
    let mut block = Block::default();
    block.attributes.insert("name".into(), attr(Type::String));
    block.attributes.insert(
        "id".into(),
        Attribute {
            computed: true,
            optional: false,
            ..attr(Type::String)
        },
    );
    block
        .attributes
        .insert("tags".into(), attr(Type::Map(Box::new(Type::String))));
    block.attributes.insert("extra".into(), attr(Type::Dynamic));
    block.block_types.insert(
        "rule".into(),
        NestedBlock {
            nesting: Nesting::List,
            block: inner.clone(),
            min_items: 0,
            max_items: 0,
        },
    );
    block.block_types.insert(
        "single".into(),
        NestedBlock {
            nesting: Nesting::Single,
            block: inner,
            min_items: 0,
            max_items: 0,
        },
    );
    block
}

fn roundtrip(block: &Block, value: &Json) -> (Json, Vec<FieldPath>) {
    let mp = block.encode(value, true).unwrap();
    let bytes = to_bytes(&mp);
    let back = from_bytes(&bytes).unwrap();
    let mut unknowns = Vec::new();
    let json = decode(
        &block.implied_type(),
        &back,
        &FieldPath::root(),
        &mut unknowns,
    )
    .unwrap();
    (json, unknowns)
}

#[test]
fn types_parse_and_print() {
    for text in [
        r#""string""#,
        r#"["list","number"]"#,
        r#"["map",["set","bool"]]"#,
        r#"["object",{"a":"string","b":["tuple",["number","dynamic"]]}]"#,
    ] {
        let ty = Type::from_json_bytes(text.as_bytes()).unwrap();
        assert_eq!(ty.to_json(), serde_json::from_str::<Json>(text).unwrap());
    }
    let opt = Type::from_json(&json!(["object", {"a": "string"}, ["a"]])).unwrap();
    assert_eq!(
        opt,
        Type::Object([("a".to_string(), Type::String)].into_iter().collect())
    );
    assert!(Type::from_json(&json!("strin")).is_err());
    assert!(Type::from_json(&json!(["list"])).is_err());
}

#[test]
fn every_attribute_is_present_and_blocks_default() {
    let block = sample_block();
    let mp = block.encode(&json!({"name": "a"}), false).unwrap();
    let map = mp.as_map().unwrap();
    let keys: Vec<&str> = map.iter().map(|(k, _)| k.as_str().unwrap()).collect();
    assert_eq!(keys, ["name", "id", "tags", "extra", "rule", "single"]);
    assert_eq!(map[1].1, Mp::Nil);
    assert_eq!(map[4].1, Mp::Array(vec![]));
    assert_eq!(map[5].1, Mp::Nil);
}

#[test]
fn unknown_markers_become_unknown_only_when_allowed() {
    let block = sample_block();
    let value = json!({"name": "$kusion_path.a:b:c:d.arn"});
    let (json, unknowns) = roundtrip(&block, &value);
    assert_eq!(json["name"], Json::Null);
    assert_eq!(unknowns, vec![FieldPath::parse("name").unwrap()]);
    let literal = block.encode(&value, false).unwrap();
    assert_eq!(
        literal.as_map().unwrap()[0].1,
        Mp::from("$kusion_path.a:b:c:d.arn")
    );
    // The wire form of an unknown is d4 00 00.
    assert_eq!(to_bytes(&unknown()), vec![0xd4, 0, 0]);
}

#[test]
fn conversions_and_errors_name_the_path() {
    let block = sample_block();
    let mp = block
        .encode(&json!({"name": 12, "rule": [{"port": "80"}]}), false)
        .unwrap();
    let (json, _) = {
        let mut u = Vec::new();
        (
            decode(&block.implied_type(), &mp, &FieldPath::root(), &mut u).unwrap(),
            u,
        )
    };
    assert_eq!(json["name"], json!("12"));
    assert_eq!(json["rule"][0]["port"], json!(80));
    let err = block
        .encode(&json!({"rule": [{"port": "eighty"}]}), false)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "at rule[0].port: expected a number, found the string \"eighty\""
    );
    let err = block.encode(&json!({"nope": 1}), false).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("at nope: unsupported attribute"),
        "{err}"
    );
    let err = block.encode_config(&json!({"id": "x"}), false).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
}

#[test]
fn sensitive_paths_follow_values() {
    let block = sample_block();
    let v =
        json!({"rule": [{"secret": "a"}, {"port": 1}, {"secret": "b"}], "single": {"secret": "c"}});
    assert_eq!(
        block.sensitive_paths(&v),
        vec!["rule[0].secret", "rule[2].secret", "single.secret"]
    );
}

#[test]
fn proposed_new_keeps_computed_prior_values() {
    let block = sample_block();
    let prior = json!({"name": "a", "id": "i-1", "tags": {"x": "1"}});
    let config = json!({"name": "b"});
    let proposed = block.proposed_new(&prior, &config);
    assert_eq!(proposed["id"], json!("i-1"));
    assert_eq!(proposed["name"], json!("b"));
    assert_eq!(proposed["tags"], Json::Null);
}

fn arb_json(depth: u32) -> impl Strategy<Value = Json> {
    let leaf = prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        any::<i64>().prop_map(Json::from),
        "[a-z$.:]{0,12}".prop_map(Json::String),
    ];
    leaf.prop_recursive(depth, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Json::Array),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..4)
                .prop_map(|m| Json::Object(m.into_iter().collect())),
        ]
    })
}

/// Values of a given type for property tests (no nulls inside lists: cty allows them, but
/// then round trips must keep them, which they do; include them sparsely via Option).
fn arb_typed() -> impl Strategy<Value = (Type, Json)> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(|b| (Type::Bool, Json::Bool(b))),
        any::<i64>().prop_map(|i| (Type::Number, Json::from(i))),
        (-1.0e6f64..1.0e6).prop_map(|f| (Type::Number, float_json(f).unwrap())),
        "[ -~]{0,16}"
            .prop_filter("not a marker", |s| !s.starts_with(UNKNOWN_MARKER))
            .prop_map(|s| (Type::String, Json::String(s))),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            inner.clone().prop_flat_map(|(t, v)| {
                prop::collection::vec(Just(v), 0..3)
                    .prop_map(move |items| (Type::List(Box::new(t.clone())), Json::Array(items)))
            }),
            inner.clone().prop_flat_map(|(t, v)| {
                prop::collection::btree_map("[a-z]{1,4}", Just(v), 0..3).prop_map(move |m| {
                    (
                        Type::Map(Box::new(t.clone())),
                        Json::Object(m.into_iter().collect()),
                    )
                })
            }),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4).prop_map(|m| {
                let ty = Type::Object(m.iter().map(|(k, (t, _))| (k.clone(), t.clone())).collect());
                let v = Json::Object(m.into_iter().map(|(k, (_, v))| (k, v)).collect());
                (ty, v)
            }),
        ]
    })
}

proptest! {
    #[test]
    fn typed_values_round_trip((ty, value) in arb_typed()) {
        let mp = encode(&ty, &value, &FieldPath::root(), false).unwrap();
        let back = from_bytes(&to_bytes(&mp)).unwrap();
        let mut unknowns = Vec::new();
        let json = decode(&ty, &back, &FieldPath::root(), &mut unknowns).unwrap();
        prop_assert_eq!(json, value);
        prop_assert!(unknowns.is_empty());
    }

    #[test]
    fn dynamic_values_round_trip(value in arb_json(3)) {
        let mp = encode(&Type::Dynamic, &value, &FieldPath::root(), false).unwrap();
        let back = from_bytes(&to_bytes(&mp)).unwrap();
        let json = decode(&Type::Dynamic, &back, &FieldPath::root(), &mut Vec::new()).unwrap();
        prop_assert_eq!(json, value);
    }

    #[test]
    fn block_values_round_trip(name in "[a-z]{0,8}", port in proptest::option::of(0i64..65536), n in 0usize..3) {
        let block = sample_block();
        let mut rules = Vec::new();
        for _ in 0..n { rules.push(json!({"port": port, "secret": "s"})); }
        let value = json!({"name": name, "tags": {"k": "v"}, "rule": rules});
        let (json, unknowns) = roundtrip(&block, &value);
        prop_assert!(unknowns.is_empty());
        prop_assert_eq!(strip_nulls(json), strip_nulls(value));
    }
}
