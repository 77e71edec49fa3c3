//! `tf-provider-schema`: a provider's GetSchema answer printed in the shape of `terraform
//! providers schema -json`, checked on the protocol 6 fixture provider (nested attribute types,
//! computed and sensitive flags) and fed to `kcl import -m terraformschema`'s converter.

use std::process::Command;

#[test]
fn fixture_provider_schema_as_terraform_json_and_kcl() {
    let out = Command::new(env!("CARGO_BIN_EXE_tf-provider-schema"))
        .arg(env!("CARGO_BIN_EXE_tfplugin6-fixture"))
        .arg("registry.example.com/kusion/fixture")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["format_version"], "1.0");
    let p = &doc["provider_schemas"]["registry.example.com/kusion/fixture"];
    assert_eq!(
        p["provider"]["block"]["attributes"]["root"],
        serde_json::json!({"type": "string", "description_kind": "plain", "required": true})
    );
    let file = &p["resource_schemas"]["fixture_file"];
    assert_eq!(file["version"], 1);
    let attrs = &file["block"]["attributes"];
    assert_eq!(attrs["id"]["computed"], true);
    assert_eq!(attrs["secret"]["sensitive"], true);
    assert_eq!(attrs["labels"]["nested_type"]["nesting_mode"], "single");
    assert_eq!(
        attrs["labels"]["nested_type"]["attributes"]["team"]["type"],
        "string"
    );
    assert!(
        attrs["path"].get("optional").is_none(),
        "false flags are left out"
    );

    let kcl = kusion_kcl::kclgen::convert(
        kusion_kcl::kclgen::DataMode::TerraformSchema,
        "fixture.json",
        &text,
    )
    .unwrap();
    for want in [
        "schema FixtureFile:\n",
        "Computed by the provider (not settable): id, sha256.",
        "    path: str\n    content: str\n    secret?: str\n    labels?: FixtureFileLabels\n",
        "schema FixtureFileLabels:\n",
        "    team?: str\n    tier?: str\n",
    ] {
        assert!(kcl.contains(want), "missing {want:?} in\n{kcl}");
    }
}
