#!/usr/bin/env python3
"""Patching into nested schema values: instances whose attributes default to other instances
or dicts, with attributes computed from their siblings, changed through dotted keys
(`a.b.c = v`, `a.b: {...}`, `a.b.l += [..]`), whole replacements, configs of an existing
instance (`app {..}`), unions (`|`) and top-level `:` definitions merged across statements.

Usage: partial-eval.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
spec_defaults = ['Spec {id = 1}', '{id = 1}', 'Spec {id = 1, value = "d"}', None]
cfg_defaults = ['Config {}', '{}', 'Config {spec.value = "c"}', None]
dependent = ['value', 'str(id)', '"${id}-${value}"', 'value or "none"', '"t" if id > 1 else "u"']
patches = [
    'config.spec.value = "v"', 'config.spec.id = 2', 'config.spec: {value = "w"}',
    'config.spec = {id = 3}', 'config.spec = Spec {id = 4}', 'config.spec.labels.a = "x"',
    'config.spec.labels: {b = "y"}', 'config.spec.items += [5]', 'config.spec.items = [6]',
    'config: {spec.tag = "t"}', 'config: {spec: {id = 7}}', 'config.extra.k = 1',
    'config.extra: {j = [1]}', 'name = "n"', 'config = {spec.id = 8}', 'config.spec.id: 9',
    'config.spec.value: "q"', 'config.nothing = 1', 'config.spec.tag = None',
]
for s in range(seed, seed + n):
    r = random.Random(s)
    L = ["schema Spec:"]
    L.append("    id: int" + (" = 0" if r.random() < 0.3 else ""))
    L.append("    value?: str" + (' = "s"' if r.random() < 0.3 else ""))
    L.append(f"    tag?: str = {r.choice(dependent)}")
    L.append("    labels?: {str:str}" + (' = {z = "0"}' if r.random() < 0.3 else ""))
    L.append("    items?: [int]" + (" = [0]" if r.random() < 0.4 else ""))
    if r.random() < 0.2:
        L.append("    check:")
        L.append("        id < 9")
    L.append("schema Config:")
    sd = r.choice(spec_defaults)
    L.append("    spec: Spec" + (f" = {sd}" if sd else ""))
    L.append("    extra?: {str:}" + (" = {k = 0}" if r.random() < 0.4 else ""))
    L.append("schema App:")
    cd = r.choice(cfg_defaults)
    L.append("    config: Config" + (f" = {cd}" if cd else ""))
    L.append('    name: str = "app"')
    if r.random() < 0.3:
        L.append("    summary: str = config.spec.tag or name")
    ps = r.sample(patches, r.randint(1, 4))
    form = r.random()
    if form < 0.5:
        L.append("app = App {")
        L += ["    " + p for p in ps]
        L.append("}")
    elif form < 0.7:
        half = r.randint(1, len(ps))
        L.append("app: App {")
        L += ["    " + p for p in ps[:half]]
        L.append("}")
        L.append("app: App {" if r.random() < 0.5 else "app: {")
        L += ["    " + p for p in ps[half:]] or ["    name = \"m\""]
        L.append("}")
    elif form < 0.85:
        L.append("_base = App {")
        L += ["    " + p for p in ps[:1]]
        L.append("}")
        L.append("app = _base {")
        L += ["    " + p for p in ps[1:]] or ['    name = "m"']
        L.append("}")
    else:
        L.append("_base = App {" + ps[0].replace(" = ", " = ", 1) + "}")
        rest = ", ".join(ps[1:]) or 'name = "m"'
        L.append(f"app = _base | {{{rest}}}")
    if r.random() < 0.3:
        L.append("t = app.config.spec.tag")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
