#!/usr/bin/env python3
"""Rule statements: protocols (`rule R for P`), parameters, inherited rules, guarded and
messaged checks, quantifiers, and calls that pass or fail them; with a protocol's attributes
given wrong types or left out.

Usage: rules.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    proto = r.random() < 0.5
    params = r.random() < 0.3
    names = []
    if proto:
        L.append("protocol PProtocol:")
        for nm, t in [('a', 'int'), ('b', 'str'), ('c', '[int]')][: r.randint(1, 3)]:
            L.append(f"    {nm}{'?' if r.random() < 0.3 else ''}: {t}")
            names.append((nm, t))
    if params:
        names.append(('p', 'int'))
    conds = {'int': ['{n} > 0', '{n} != 3', '{n} in [1, 2]'], 'str': ['{n} != "x"', 'len({n}) > 1', '{n}.startswith("a")'],
             '[int]': ['len({n}) > 0', 'all v in {n} {{ v > 0 }}', 'any v in {n} {{ v > 1 }}', '1 in {n}']}
    base = r.random() < 0.3
    if base:
        L.append("rule Base:")
        L.append(f"    {r.choice(['True', 'False', '1 < 2', 'len([]) == 1'])}" + (', "base failed"' if r.random() < 0.5 else ''))
    head = "rule R"
    if params:
        head += "[p: int]"
    if base:
        head += "(Base)"
    if proto:
        head += " for PProtocol"
    L.append(head + ":")
    for _ in range(r.randint(1, 3)):
        if names and r.random() < 0.85:
            nm, t = r.choice(names)
            c = r.choice(conds[t]).format(n=nm)
        else:
            c = r.choice(['True', 'False', 'typeof(1) == "int"', '[1][0] == 1'])
        if r.random() < 0.25 and names:
            c += f" if {r.choice(names)[0]}"
        if r.random() < 0.4:
            c += ', "check ' + str(r.randint(1, 9)) + (' ${' + names[0][0] + '}' if names and r.random() < 0.5 else '') + '"'
        L.append("    " + c)
    vals = {'int': ['1', '3', '0', '"s"'], 'str': ['"x"', '"ab"', '1'], '[int]': ['[1, 2]', '[]', '[0]'], }
    for _ in range(r.randint(1, 2)):
        arg = "(" + r.choice(['1', '2', '3', '"q"']) + ")" if params else ''
        cfg = []
        for nm, t in names:
            if nm == 'p':
                continue
            if r.random() < 0.8:
                cfg.append(f"{nm} = {r.choice(vals[t])}")
        if r.random() < 0.1:
            cfg.append("z = 1")
        call = f"R{arg} {{{', '.join(cfg)}}}" if (cfg or r.random() < 0.5) else f"R{arg if arg else '()'}"
        if r.random() < 0.3:
            L.append(f"x = {call}")
        else:
            L.append(call)
    if r.random() < 0.3:
        L.append("y = 1")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
