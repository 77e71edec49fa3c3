//! A generator of large, realistic KCL configuration files for benchmarks and stress tests.

use std::fmt::Write as _;

/// Generates about `lines` lines of Konfig-style KCL: schema definitions with checks, then
/// many application configs with nested dicts, lists, interpolated strings, `if` entries and
/// comments. Deterministic for a given `lines`.
pub fn generate_config(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 40);
    s.push_str("import units\nimport regex\n\n");
    s.push_str(
        r#"schema Container:
    """A container in a workload."""
    name: str
    image: str
    command?: [str]
    env?: {str:str} = {}
    resources: {str:{str:str}} = {limits = {cpu = "500m", memory = "512Mi"}}
    ports?: [int]

    check:
        len(name) > 0, "container name must not be empty"
        regex.match(image, r"^[a-z0-9./:-]+$") if image

schema App:
    name: str
    namespace: str = "default"
    replicas: int = 1
    labels: {str:str} = {}
    containers: {str:Container}
    [key: str]: any

    check:
        replicas >= 0 and replicas <= 100, "replicas out of range"

"#,
    );
    let mut i = 0usize;
    let mut count = 0usize;
    while count < lines {
        let block = app_block(i);
        count += block.lines().count();
        s.push_str(&block);
        i += 1;
    }
    while s.ends_with("\n\n") {
        s.pop();
    }
    s
}

fn app_block(i: usize) -> String {
    let mut b = String::new();
    let env = ["dev", "test", "prod"][i % 3];
    let _ = write!(
        b,
        r#"# Application number {i}
app{i} = App {{
    name = "app-{i}"
    namespace = "team-{team}"
    replicas = {rep}
    labels = {{
        "app.kubernetes.io/name": "app-{i}"
        "app.kubernetes.io/env": "{env}"
        tier: "backend"
    }}
    containers = {{
        main = Container {{
            name = "main"
            image = "registry.example.com/team-{team}/app-{i}:v1.{minor}.0"
            command = ["/bin/server", "--port", "${{8080 + {port}}}", "--env={env}"]
            env = {{
                LOG_LEVEL = "info"
                SERVICE_NAME = "app-{i}"
                MAX_CONNECTIONS = "{conn}"
            }}
            ports = [8080, 9090, {port}]
        }}
        sidecar = Container {{
            name = "proxy"
            image = "envoyproxy/envoy:v1.29.0"
            resources.limits.memory = "{mem}Mi"
        }}
    }}
    if "{env}" == "prod":
        replicas = {prod_rep}
    annotations = {{k: v for k, v in {{"owner": "team-{team}", "index": "{i}"}}}}
    ready = all c in ["main", "proxy"] {{len(c) > 0}}
}}

"#,
        team = i % 17,
        rep = 1 + i % 5,
        minor = i % 10,
        port = 10000 + i % 1000,
        conn = 100 + i % 900,
        mem = 128 << (i % 3),
        prod_rep = 3 + i % 4,
    );
    b
}
