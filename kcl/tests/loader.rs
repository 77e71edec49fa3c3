//! Package loading: root detection, absolute/relative/external imports, system and plugin
//! modules, several main files, `${KCL_MOD}` and missing modules.

use kusion_kcl::{ImportTarget, LoadOptions, load_program};
use std::fs;
use std::path::Path;

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, text).unwrap();
}

fn targets(prog: &kusion_kcl::Program) -> Vec<ImportTarget> {
    let mut out = Vec::new();
    let mut mods: Vec<&kusion_kcl::Module> = prog.main.modules.iter().map(|m| &**m).collect();
    for (_, p) in prog.packages.iter() {
        mods.extend(p.modules.iter().map(|m| &**m));
    }
    for m in mods {
        for s in &m.body {
            if let kusion_kcl::ast::StmtKind::Import(i) = &s.kind {
                out.push(
                    prog.import_target(i)
                        .cloned()
                        .expect("every import is resolved"),
                );
            }
        }
    }
    out
}

#[test]
fn resolves_all_import_forms() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("proj");
    let ext = dir.path().join("extlib");
    write(&root, "kcl.mod", "[package]\nname = \"proj\"\n");
    write(
        &root,
        "app/main.k",
        "import base.lib\nimport .local as loc\nimport ..shared\nimport math\nimport kcl_plugin.hello\nimport ext.sub\na = lib.x\n",
    );
    write(&root, "app/extra.k", "b = 2\n");
    write(&root, "app/local.k", "y = 1\n");
    write(&root, "base/lib/a.k", "import base.lib\nx = 1\n");
    write(&root, "base/lib/b.k", "z = 2\n");
    write(
        &root,
        "base/lib/b_test.k",
        "this is not parsed (test files are skipped)\n",
    );
    write(&root, "shared/s.k", "s = 1\n");
    write(&ext, "sub/e.k", "e = 1\n");

    let opts = LoadOptions {
        external: vec![("ext".into(), ext.clone())],
        work_dir: None,
    };
    let files = vec![root.join("app/main.k"), root.join("app/extra.k")];
    let prog = load_program(&files, &opts).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(prog.root, std::path::absolute(&root).unwrap());
    assert_eq!(prog.main.modules.len(), 2);
    let lib = prog.package("base.lib").expect("absolute import loaded");
    assert_eq!(
        lib.modules.len(),
        2,
        "both files of the package, not the _test.k file"
    );
    assert!(
        prog.package("app.local").is_some(),
        "relative import resolved against the importing file"
    );
    assert!(prog.package("shared").is_some(), "parent-relative import");
    assert!(prog.package("ext.sub").is_some(), "external package");
    let t = targets(&prog);
    assert!(t.contains(&ImportTarget::System("math".into())));
    assert!(t.contains(&ImportTarget::Plugin("hello".into())));
    assert!(t.contains(&ImportTarget::Package("base.lib".into())));
}

#[test]
fn missing_module_is_an_error_with_position() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "kcl.mod", "");
    write(root, "main.k", "import .nothere.pkg as p\n");
    let err = load_program(&[root.join("main.k")], &LoadOptions::default()).unwrap_err();
    let text = err.render();
    assert!(text.contains("error[E2F04]: CannotFindModule"), "{text}");
    assert!(
        text.contains("Cannot find the module .nothere.pkg from"),
        "{text}"
    );
    assert!(text.contains("main.k:1:1"), "{text}");
}

#[test]
fn kcl_mod_variable_and_syntax_errors_in_imports() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "kcl.mod", "");
    write(root, "main.k", "import pkg\n");
    write(root, "pkg/p.k", "a = (\n");
    write(root, "other/o.k", "o = 1\n");
    let opts = LoadOptions {
        external: Vec::new(),
        work_dir: Some(root.to_path_buf()),
    };
    let ok = load_program(&["${KCL_MOD}/other/o.k".into()], &opts)
        .unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(ok.main.modules.len(), 1);
    let err = load_program(&[root.join("main.k")], &opts).unwrap_err();
    assert!(
        err.render().contains("p.k:"),
        "syntax errors of imported files are reported: {}",
        err.render()
    );
}

#[test]
fn folder_input_is_the_main_package() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "a.k", "a = 1\n");
    write(root, "b.k", "b = 1\n");
    let prog = load_program(&[root.to_path_buf()], &LoadOptions::default()).unwrap();
    assert_eq!(prog.main.modules.len(), 2);
}

#[test]
fn external_packages_resolve_their_own_absolute_imports() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("lib");
    let app = dir.path().join("lib/examples/app");
    let k8s = dir.path().join("vendor/k8s");
    write(&lib, "kcl.mod", "[package]\nname = \"lib\"\n");
    write(&lib, "models/a/a.k", "import models.b\nimport k8s.core\n");
    write(&lib, "models/b/b.k", "b = 1\n");
    write(&lib, "render/render.k", "import models.a\n");
    write(&k8s, "core/c.k", "import meta\n");
    write(&k8s, "meta/m.k", "m = 1\n");
    write(
        &app,
        "kcl.mod",
        "[package]\nname = \"app\"\n[dependencies]\nlib = { path = \"../..\" }\n[profile]\nentries = [\"main.k\", \"${lib:KCL_MOD}/render/render.k\"]\n",
    );
    write(&app, "main.k", "import lib.models.a\n");
    let opts = LoadOptions {
        external: vec![("k8s".into(), k8s.clone())],
        work_dir: Some(app.clone()),
    };
    // No inputs: the kcl.mod profile entries form the main package.
    let prog = load_program(&[], &opts).unwrap_or_else(|d| panic!("{}", d.render()));
    assert_eq!(prog.main.modules.len(), 2);
    for p in ["lib.models.a", "lib.models.b", "k8s.core", "k8s.meta"] {
        assert!(
            prog.package(p).is_some(),
            "{p} missing; have {:?}",
            prog.packages
                .iter()
                .map(|(k, _)| k.to_string())
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(
        prog.packages.len(),
        4,
        "the same folder is one package whichever way it is imported"
    );
}

#[test]
fn a_path_in_both_the_package_and_a_dependency_is_refused() {
    // Upstream refuses an import that names both a folder of the importing package and an
    // external package (a dependency vendored beside the models, say), even the same folder.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "kcl.mod", "[package]\nname = \"konfig\"\n");
    write(root, "k8s/core/c.k", "c = 1\n");
    write(root, "main.k", "import k8s.core\nx = core.c\n");
    for ext in [root.join("k8s"), root.join("other/k8s")] {
        write(&ext, "core/c.k", "c = 2\n");
        let opts = LoadOptions {
            external: vec![("k8s".into(), ext)],
            work_dir: Some(root.to_path_buf()),
        };
        let err = load_program(&[root.join("main.k")], &opts)
            .unwrap_err()
            .render();
        assert!(
            err.contains(
                "the `k8s.core` is found multiple times in the current package and vendor package"
            ) && err.contains("main.k:1:1"),
            "{err}"
        );
    }
    // Only in the dependency, or only in the package: resolved.
    fs::remove_dir_all(root.join("k8s")).unwrap();
    let opts = LoadOptions {
        external: vec![("k8s".into(), root.join("other/k8s"))],
        work_dir: Some(root.to_path_buf()),
    };
    load_program(&[root.join("main.k")], &opts).unwrap_or_else(|d| panic!("{}", d.render()));
}
