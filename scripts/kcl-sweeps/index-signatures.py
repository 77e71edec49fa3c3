#!/usr/bin/env python3
"""Schemas with index signatures ([str]: T, [k: str]: T = default, [...str]: T, literal-union key
types), beside ordinary attributes, inherited, checked, and configs that fit or break them.

Usage: index-signatures.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
vals = {'int': ['1', '0', '-3'], 'str': ['"x"', '""', '"a-b"'], '[int]': ['[1]', '[]'],
        '{str:int}': ['{a = 1}', '{}'], 'bool': ['True'], 'any': ['1', '"s"', '[2]'],
        'int|str': ['2', '"z"'], 'N': ['N {}', '{v = 2}', '{}'], '"p"|"q"': ['"p"']}
key_tys = ['str', 'str', 'str', '"a"|"b"|"c"', 'K']
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    if r.random() < 0.3:
        L += ["schema N:", "    v: int = 1", "    w?: str"]
    has_n = bool(L)
    tys = [t for t in vals if t != 'N' or has_n]
    vt = r.choice(tys)
    kt = r.choice(key_tys)
    if kt == 'K':
        L.append('type K = "a" | "b"')
    named = r.random() < 0.5
    kname = r.choice(['k', 'name', 'key'])
    rest = r.random() < 0.2
    sig = f"[{kname + ': ' if named else ''}{'...' if rest else ''}{kt}]: {vt}"
    if r.random() < 0.4:
        if named and vt == 'str' and r.random() < 0.5:
            sig += f" = {kname}"
        else:
            sig += f" = {r.choice(vals[vt])}"
    body = []
    attrs = []
    for i in range(r.randint(0, 2)):
        at = r.choice(tys)
        nm = r.choice(['a', 'x', 'name', 'k', f'f{i}'])
        if nm in [a for a, _ in attrs]:
            continue
        opt = '?' if r.random() < 0.3 else ''
        d = f" = {r.choice(vals[at])}" if r.random() < 0.6 else ''
        body.append(f"    {nm}{opt}: {at}{d}")
        attrs.append((nm, at))
    pos = r.randint(0, len(body))
    body.insert(pos, "    " + sig)
    parent = r.random() < 0.25
    if parent:
        L.append("schema B:")
        if r.random() < 0.5:
            L.append("    " + sig)
            L.append("    base: int = 1")
            body.remove("    " + sig)
        else:
            bt = r.choice(['int', 'str'])
            L.append(f"    base: {bt} = {vals[bt][0]}")
        L.append("schema M(B):")
    else:
        L.append("schema M:")
    L += body or ["    pass"]
    if r.random() < 0.35:
        L.append("    check:")
        c = r.choice([f"{kname} in ['a', 'b']" if named else "True",
                      f"len({kname}) < 3" if named else "len(self) < 9",
                      "len(self) < 3", f"self[{kname}] != None" if named else "True",
                      "a > 0 if a" if ('a', 'int') in attrs else "True"])
        L.append(f"        {c}" + (', "bad ${' + kname + '}"' if named and r.random() < 0.4 else ''))
    entries = []
    for _ in range(r.randint(0, 3)):
        k = r.choice(['a', 'b', 'c', 'zz', '"d.e"', 'x', 'name', 'base'])
        op = r.choice(['=', ':', ':', '+='] if vt == '[int]' else ['=', ':'])
        v = r.choice(vals[vt] + ['"s"', '1', 'None'] if r.random() < 0.3 else vals[vt])
        if r.random() < 0.15:
            entries.append(f"{k}.v = 3" if vt == 'N' else f"{k} = {v}")
        else:
            entries.append(f"{k} {op} {v}")
    form = r.random()
    if form < 0.6:
        L.append(f"m = M {{{', '.join(entries)}}}")
    elif form < 0.8:
        L.append(f"m: M = {{{', '.join(entries)}}}")
    else:
        L.append(f"_m = M {{{', '.join(entries[:1])}}}")
        L.append(f"m = _m | {{{', '.join(entries[1:])}}}")
    tail = r.random()
    if tail < 0.2:
        L.append("ks = [k for k in m]")
    elif tail < 0.35:
        L.append("v = m.a")
    elif tail < 0.45:
        L.append('n = len(m)')
    elif tail < 0.55:
        L.append('t = typeof(m)')
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
