//! Konfig stacks of varied shapes on the shared Konfig models (`$KUSION_SHARED/conformance/
//! konfig`), compiled like `gen-fleet.sh`'s stacks: a `base/base.k` with one to three
//! `frontend.Server`s (or a `frontend.Job`) built from the attributes the models allow, and a
//! stack `main.k` that overrides some of them with `=`, `:`, `+=`, selector keys (`a.b.c: v`)
//! and unions, adds apps of its own, and reads `-D` options, passed on the command line or
//! through a `kcl.yaml` settings file.

use std::path::Path;

use super::gen_::Rng;
use super::oracle::{Program, Upstream};
use super::{Tally, check_one};

const IMPORTS: &str = "import konfig.models.kube.frontend
import konfig.models.kube.frontend.container
import konfig.models.kube.frontend.service
import konfig.models.kube.frontend.configmap
import konfig.models.kube.frontend.secret
import konfig.models.kube.frontend.sidecar as s
import konfig.models.kube.frontend.volume as v
import konfig.models.kube.frontend.container.probe as p
import konfig.models.kube.templates.resource as res_tpl
";

const WORDS: &[&str] = &[
    "cart", "search", "auth", "media", "ledger", "notify", "orders", "gateway",
];
const TEAMS: &[&str] = &["core", "retail", "data", "platform"];
const ENVS: &[&str] = &["dev", "test", "prod"];
const RES: &[&str] = &["tiny", "small", "medium", "large"];

struct StackGen {
    rng: Rng,
}

impl StackGen {
    fn word(&mut self) -> &'static str {
        WORDS[self.rng.below(WORDS.len())]
    }

    fn env_entries(&mut self, n: usize) -> Vec<String> {
        (0..n)
            .map(|k| {
                let name = *self.rng.pick(&[
                    "GET_HOSTS_FROM",
                    "APP_TEAM",
                    "LOG_LEVEL",
                    "REGION",
                    "MODE",
                    "ZONE",
                ]);
                format!("env.{name}{k}: {{\n    value = \"{}\"\n}}", self.word())
            })
            .collect()
    }

    fn main_container(&mut self, app: &str) -> String {
        let mut attrs = Vec::new();
        if self.rng.chance(60) {
            attrs.push(format!("name = \"{app}-main\""));
        }
        let n = self.rng.below(4);
        attrs.extend(self.env_entries(n));
        if self.rng.chance(30) {
            attrs.push(format!(
                "env: {{\n    \"cfg.{}\": {{value = \"v{}\"}}\n}}",
                self.word(),
                self.rng.below(9)
            ));
        }
        if self.rng.chance(70) {
            let port = *self.rng.pick(&[80, 8080, 6379, 9090]);
            attrs.push(format!("ports = [{{containerPort = {port}}}]"));
        }
        if self.rng.chance(30) {
            attrs.push("command = [\"/bin/server\"]\nargs = [\"--serve\", \"--v=2\"]".into());
        }
        if self.rng.chance(20) {
            attrs.push(
                "livenessProbe = p.Probe {\n    periodSeconds = 5\n    successThreshold = 1\n    handler = p.Exec {command = [\"/bin/sh\", \"-c\", \"echo ok\"]}\n}"
                    .into(),
            );
        }
        block("container.Main", &attrs)
    }

    fn server(&mut self, app: &str, team: &str) -> String {
        let mut attrs = vec![format!("name = \"{app}\"")];
        attrs.push(format!("mainContainer = {}", self.main_container(app)));
        attrs.push(format!(
            "image = \"registry.example.com/{team}/{app}:v{}.{}\"",
            self.rng.below(3),
            self.rng.below(10)
        ));
        if self.rng.chance(50) {
            attrs.push(format!("replicas = {}", 1 + self.rng.below(5)));
        }
        if self.rng.chance(80) {
            attrs.push(format!(
                "schedulingStrategy.resource = res_tpl.{}",
                self.rng.pick(RES)
            ));
        }
        if self.rng.chance(50) {
            attrs.push(format!(
                "labels = {{\n    \"team\" = \"{team}\"\n    \"app.kubernetes.io/part-of\" = \"{app}\"\n}}"
            ));
        }
        if self.rng.chance(25) {
            attrs.push(format!("annotations = {{\"owner\" = \"{team}\"}}"));
        }
        if self.rng.chance(60) {
            let port = *self.rng.pick(&[80, 8080, 6379]);
            let ty = if self.rng.chance(30) {
                "\n    type = \"NodePort\""
            } else {
                ""
            };
            attrs.push(format!(
                "services = [\n    service.Service {{{ty}\n        ports = [{{\"port\" = {port}}}]\n    }}\n]"
            ));
        }
        if self.rng.chance(20) {
            attrs.push(format!(
                "configMaps = [\n    configmap.ConfigMap {{\n        data = {{\"{}.conf\" = \"k=v\"}}\n    }}\n]",
                self.word()
            ));
        }
        if self.rng.chance(15) {
            attrs.push("secrets = [\n    secret.Secret {\n        data = {\"token\" = \"dG9rZW4=\"}\n        type = \"Opaque\"\n    }\n]".into());
        }
        if self.rng.chance(15) {
            attrs.push(format!(
                "sidecarContainers = [\n    s.Sidecar {{\n        name = \"{}-log\"\n        image = \"fluentd:1.0\"\n        resource = res_tpl.tiny\n    }}\n]",
                app
            ));
        }
        if self.rng.chance(15) {
            attrs.push("volumes = [\n    v.Volume {\n        name = \"logs\"\n        volumeSource = v.EmptyDir {}\n        mounts = [v.Mount {path = \"/var/log\"}]\n    }\n]".into());
        }
        if self.rng.chance(10) {
            attrs.push("workloadType = \"StatefulSet\"".into());
        }
        if self.rng.chance(10) {
            attrs.push("needNamespace = False".into());
        }
        if self.rng.chance(10) {
            attrs.push("selector: {\n    \"app.kubernetes.io/version\" = \"v1\"\n}".into());
        }
        if self.rng.chance(10) {
            attrs.push("podMetadata: {\n    labels: {\"tier\" = \"web\"}\n    annotations: {\"owner\" = \"iac\"}\n}".into());
        }
        if self.rng.chance(8) {
            attrs.push("deploymentStrategy: {\n    type = \"RollingUpdate\"\n    rollingUpdate: {maxSurge = 1, maxUnavailable = 1}\n}".into());
        }
        if self.rng.chance(8) {
            attrs.push("affinity: {\n    podAntiAffinity: {\n        requiredDuringSchedulingIgnoredDuringExecution: [{\n            labelSelector: {matchExpressions: [{key: \"app\", operator: \"In\", values: [\"x\"]}]}\n            topologyKey: \"kubernetes.io/hostname\"\n        }]\n    }\n}".into());
        }
        // some attributes come first in one stack and last in another
        if attrs.len() > 3 && self.rng.chance(40) {
            let i = 1 + self.rng.below(attrs.len() - 1);
            let a = attrs.remove(i);
            attrs.push(a);
        }
        block("frontend.Server", &attrs)
    }

    fn job(&mut self, app: &str, team: &str) -> String {
        let mut attrs = vec![format!("name = \"{app}\"")];
        attrs.push(format!("mainContainer = {}", self.main_container(app)));
        attrs.push(format!(
            "image = \"registry.example.com/{team}/{app}-job:v1\""
        ));
        if self.rng.chance(50) {
            attrs.push(format!("backoffLimit = {}", self.rng.below(6)));
        }
        if self.rng.chance(40) {
            attrs.push("restartPolicy = \"OnFailure\"".into());
        }
        if self.rng.chance(50) {
            attrs.push(format!(
                "schedulingStrategy.resource = res_tpl.{}",
                self.rng.pick(RES)
            ));
        }
        block("frontend.Job", &attrs)
    }

    /// Overrides of an app in the stack's `main.k`.
    fn overrides(&mut self, team: &str, app: &str, job: bool) -> Vec<String> {
        let mut o = Vec::new();
        if self.rng.chance(70) {
            o.push(format!(
                "image = \"registry.example.com/{team}/{app}:v9.{}\"",
                self.rng.below(9)
            ));
        }
        if !job && self.rng.chance(50) {
            o.push(format!("replicas = {}", 1 + self.rng.below(6)));
        }
        // (upstream rejects most of these: the merged entry misses the map's defaults)
        if self.rng.chance(8) {
            o.push(format!(
                "mainContainer.env.STACK_{}: {{\n    value = \"{}\"\n}}",
                self.rng.below(3),
                self.word()
            ));
        }
        if self.rng.chance(25) {
            o.push(format!(
                "schedulingStrategy.resource = res_tpl.{}",
                self.rng.pick(RES)
            ));
        }
        if !job && self.rng.chance(25) {
            o.push(format!(
                "labels: {{\"stack\" = \"{}\"}}",
                self.rng.pick(ENVS)
            ));
        }
        if !job && self.rng.chance(15) {
            o.push("services += [\n    service.Service {\n        name = \"extra\"\n        ports = [{\"port\" = 9090}]\n    }\n]".into());
        }
        if !job && self.rng.chance(10) {
            o.push("annotations = {\"a\" = \"1\"} | {\"b\" = \"2\"}".into());
        }
        if self.rng.chance(15) {
            o.push("image = option(\"image\") or \"nginx:latest\"".into());
        }
        o
    }

    fn stack(&mut self, konfig: &Path, k: u64) -> Program {
        let word = self.word();
        let team = *self.rng.pick(TEAMS);
        let env = *self.rng.pick(ENVS);
        let app_base = format!("{word}-{k:04}");
        let njobs = usize::from(self.rng.chance(15));
        let napps = if njobs > 0 { 1 } else { 1 + self.rng.below(3) };
        let mut base = format!("{IMPORTS}\n");
        let mut apps = Vec::new();
        for a in 0..napps {
            let app = format!("{app_base}-{}", ["web", "db", "cache"][a]);
            let var = format!("{word}{a}");
            let job = njobs > 0;
            let body = if job {
                self.job(&app, team)
            } else {
                self.server(&app, team)
            };
            base.push_str(&format!("{var}: {body}\n\n"));
            apps.push((var, app, job));
        }
        let mut main = format!("{IMPORTS}\n");
        for (var, app, job) in &apps {
            let o = self.overrides(team, app, *job);
            if !o.is_empty() {
                let head = if *job {
                    "frontend.Job"
                } else {
                    "frontend.Server"
                };
                main.push_str(&format!("{var}: {}\n\n", block(head, &o)));
            }
        }
        if self.rng.chance(25) {
            let app = format!("{app_base}-extra");
            let body = self.server(&app, team);
            main.push_str(&format!("{word}Extra: {body}\n"));
        }
        let kcl_mod = konfig.display().to_string();
        let k8s = konfig.join("vendor/k8s").display().to_string();
        let render = "${konfig:KCL_MOD}/models/kube/render/render.k";
        let mut files = vec![
            ("base/base.k".to_string(), base),
            (format!("{env}/main.k"), main),
        ];
        let opts = [
            ("app", app_base.clone()),
            ("appns", team.to_string()),
            ("appenv", env.to_string()),
        ];
        let mut args: Vec<String>;
        match self.rng.below(4) {
            0 => {
                let mut y = format!(
                    "kcl_cli_configs:\n  files:\n    - ../base/base.k\n    - main.k\n    - {render}\n"
                );
                y.push_str("kcl_options:\n");
                for (key, val) in &opts {
                    y.push_str(&format!("  - key: {key}\n    value: {val}\n"));
                }
                files.push((format!("{env}/kcl.yaml"), y));
                args = vec!["-Y".into(), format!("{env}/kcl.yaml")];
            }
            choice => {
                args = vec!["base/base.k".into(), format!("{env}/main.k"), render.into()];
                if choice != 1 {
                    for (key, val) in &opts {
                        args.push("-D".into());
                        args.push(format!("{key}={val}"));
                    }
                }
            }
        }
        args.extend([
            "-E".into(),
            format!("konfig={kcl_mod}"),
            "-E".into(),
            format!("k8s={k8s}"),
        ]);
        if self.rng.chance(20) {
            args.push("-D".into());
            args.push(format!("image=docker.io/{word}:{}", self.rng.below(5)));
        }
        Program { files, args }
    }
}

/// `head {\n attrs... \n}` with the attributes indented.
fn block(head: &str, attrs: &[String]) -> String {
    let mut s = format!("{head} {{\n");
    for a in attrs {
        for l in a.lines() {
            s.push_str(&format!("    {l}\n"));
        }
    }
    s.push('}');
    s
}

/// `n` stacks from `seed`, each checked against upstream.
pub fn run_stacks(up: &mut Upstream, konfig: &Path, seed: u64, n: u64, t: &mut Tally) {
    for k in seed..seed + n {
        let mut g = StackGen {
            rng: Rng::new(k ^ 0x6b6f_6e66),
        };
        let p = g.stack(konfig, k % 10_000);
        check_one(up, &format!("konfig seed {k}"), &p, t);
    }
}
