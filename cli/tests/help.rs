//! The command tree's documentation: every option and argument explains itself, and options show
//! up only on the commands where they mean something.

use clap::CommandFactory;

fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.to_string(), cmd.clone()));
    for sub in cmd.get_subcommands() {
        walk(sub, &format!("{path} {}", sub.get_name()), out);
    }
}

/// Every command of the built tree (globals propagated, as `--help` shows them).
fn commands() -> Vec<(String, clap::Command)> {
    let mut cmd = kusionctl::Cli::command();
    cmd.build();
    let mut out = Vec::new();
    walk(&cmd, "kusionctl", &mut out);
    out
}

#[test]
fn every_command_option_and_argument_has_help() {
    let mut missing = Vec::new();
    for (path, cmd) in commands() {
        if cmd.get_about().is_none() && path != "kusionctl" {
            missing.push(format!("{path}: the command"));
        }
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            // clap's own --help/--version (and the `help` subcommand's) explain themselves.
            if id == "help" || id == "version" {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            if help.trim().is_empty() {
                missing.push(format!("{path}: {id}"));
            }
        }
    }
    assert!(missing.is_empty(), "undocumented:\n{}", missing.join("\n"));
}

fn options(path: &str) -> Vec<String> {
    let (_, cmd) = commands()
        .into_iter()
        .find(|(p, _)| p == path)
        .unwrap_or_else(|| panic!("no command {path}"));
    cmd.get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

#[test]
fn options_only_where_they_mean_something() {
    let stack_only = ["state-backend", "state-dir", "runtime-config"];
    for path in [
        "kusionctl init",
        "kusionctl compile",
        "kusionctl completion",
        "kusionctl version",
        "kusionctl plugin list",
        "kusionctl cmdb lookup",
        "kusionctl graph",
    ] {
        let opts = options(path);
        for o in stack_only {
            assert!(
                !opts.iter().any(|x| x == o),
                "{path} offers --{o}: {opts:?}"
            );
        }
    }
    for path in [
        "kusionctl completion",
        "kusionctl plugin keygen",
        "kusionctl init",
    ] {
        let opts = options(path);
        for o in ["config", "set"] {
            assert!(
                !opts.iter().any(|x| x == o),
                "{path} offers --{o}: {opts:?}"
            );
        }
    }
    for o in [
        "state-backend",
        "state-dir",
        "runtime-config",
        "output",
        "config",
    ] {
        assert!(
            options("kusionctl apply").iter().any(|x| x == o),
            "apply lacks --{o}"
        );
    }
    for o in ["state-backend", "state-dir", "output"] {
        assert!(
            options("kusionctl state history").iter().any(|x| x == o),
            "state history lacks --{o}"
        );
    }
    assert!(
        !options("kusionctl completion")
            .iter()
            .any(|x| x == "output")
    );
}
