#!/usr/bin/env python3
"""Schemas whose attributes read each other out of order, across a base, a mixin, if blocks, config overrides and merges (upstream computes such reads lazily).

Usage: order.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    names = [f"a{i}" for i in range(r.randint(3, 7))]
    # acyclic dependency over a random permutation; statement order random
    perm = names[:]; r.shuffle(perm)
    deps = {}
    for i, nm in enumerate(perm):
        cands = perm[i+1:]
        deps[nm] = r.sample(cands, min(len(cands), r.randint(0, 2)))
    def expr(nm):
        d = deps[nm]
        kind = r.randint(0, 5)
        if not d:
            return r.choice(['1', '2', '"x"', '[1]', '{k = 1}', 'None'])  if kind == 0 else str(r.randint(0, 9))
        if kind == 1:
            return f"[{', '.join(d)}]"
        if kind == 2:
            return "{" + ", ".join(f'{x} = {x}' for x in d) + "}"
        if kind == 3:
            return f"{d[0]} if {d[0]} else {r.randint(0, 3)}"
        if kind == 4:
            return f'"${{{d[0]}}}-s"'
        return f"[{d[0]}] + [{', '.join(d)}]"
    lines = ["schema Base:"]
    base_names = r.sample(names, r.randint(0, len(names) // 2))
    child_names = [x for x in names if x not in base_names]
    order = names[:]; r.shuffle(order)
    for nm in order:
        if nm in base_names:
            lines.append(f"    {nm} = {expr(nm)}")
    if not base_names:
        lines.append("    _z = 0")
    lines.append("")
    mixin = r.random() < 0.3
    if mixin:
        mn = r.choice(names)
        lines.append("schema XMixin:")
        lines.append(f"    {mn}x = {mn}")
        lines.append("")
    lines.append("schema Child(Base):")
    if mixin:
        lines.append("    mixin [XMixin]")
    for nm in order:
        if nm in child_names:
            if r.random() < 0.3:
                cond = r.choice(deps[nm]) if deps[nm] else "True"
                lines.append(f"    if {cond}:")
                lines.append(f"        {nm} = {expr(nm)}")
                lines.append(f"    else:")
                lines.append(f"        {nm} = 0")
            else:
                lines.append(f"    {nm} = {expr(nm)}")
    if r.random() < 0.4 and base_names:
        ov = r.choice(base_names)
        lines.append(f"    {ov} = {r.randint(10, 20)}")
    lines.append("")
    cfg = []
    for nm in r.sample(names, r.randint(0, 2)):
        cfg.append(f"{nm} = {r.randint(30, 40)}")
    lines.append(f"c = Child {{{', '.join(cfg)}}}")
    if r.random() < 0.3:
        lines.append(f"b = Base {{}}")
    if r.random() < 0.3:
        lines.append(f"d = c | {{{r.choice(names)} = 99}}")
    out.append("\n".join(lines) + "\n")
print("#---\n".join(out))
