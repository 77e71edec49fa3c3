#!/usr/bin/env python3
"""String interpolation with and without format specs, triple-quoted strings, str.format, raw strings and `$$` escapes.

Usage: strings.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
vals = ['1', '1.5', '"a"', 'True', 'None', '[1, "b"]', '{k = 1}', '{"a": [1]}', '1Ki', '-0.0', '1e20', '""', '"x\\ny"', '[]', '{}', 'Undefined']
specs = ['', ': #json', ': #yaml', ':#json', ':#yaml', ': #jsonx']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    for i in range(r.randint(1, 3)):
        v = r.choice(vals)
        sp = r.choice(specs)
        form = r.randint(0, 5)
        if form == 0:
            L.append(f'v = {v}\ns{i} = "pre ${{v{sp}}} post"')
        elif form == 1:
            L.append(f's{i} = "${{{v}{sp}}}"')
        elif form == 2:
            L.append(f"s{i} = '''a\n${{{v}{sp}}}\nb'''")
        elif form == 3:
            L.append(f's{i} = "{{}} {{}}".format({v}, {r.choice(vals)})')
        elif form == 4:
            L.append(f's{i} = str({v}) + "${{{v}}}"')
        else:
            L.append(f's{i} = r"${{{v}}}" + "$${{x}}"')
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
