//! `-Y` settings files naming files in a dependency's root (`${name:KCL_MOD}/...`), as Konfig
//! stacks do: the path expands to the dependency declared in the stack's kcl.mod.

use std::path::Path;

use kusion_kcl::{RunOptions, run_full};

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn settings_file_entries_expand_dependency_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("konfig");
    write(&root, "kcl.mod", "[package]\nname = \"konfig\"\n");
    write(
        &root,
        "models/app.k",
        "schema App:\n    name: str\n    replicas: int = 1\n",
    );
    write(
        &root,
        "models/render/render.k",
        "import models\n\nout = [{name = a.name, replicas = a.replicas} for a in models.App.instances()]\n",
    );
    let stack = root.join("projects/demo/dev");
    write(
        &stack,
        "kcl.mod",
        "[package]\nname = \"demo-dev\"\n\n[dependencies]\nkonfig = { path = \"../../..\" }\n",
    );
    write(
        &root,
        "projects/demo/base/base.k",
        "import konfig.models\n\n_app: models.App {\n    name = option(\"project\")\n}\n",
    );
    write(
        &stack,
        "main.k",
        "import konfig.models\n\n_app: models.App {\n    replicas = 2\n}\n",
    );
    write(
        &stack,
        "kcl.yaml",
        "kcl_cli_configs:\n  files:\n    - ../base/base.k\n    - main.k\n    - ${konfig:KCL_MOD}/models/render/render.k\nkcl_options:\n  - key: project\n    value: demo\n",
    );
    let opts = RunOptions {
        work_dir: Some(stack.clone()),
        settings: vec![stack.join("kcl.yaml")],
        ..Default::default()
    };
    let out = run_full(&[], &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.text, "out:\n- name: demo\n  replicas: 2\n");
}
