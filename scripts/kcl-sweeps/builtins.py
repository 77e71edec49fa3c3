#!/usr/bin/env python3
"""Builtin conversions and operators on values of every kind, typed `any` so the run time decides.

Usage: builtins.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
vals = ['0', '1', '-7', '3.0', '2.5', '-0.5', '1e3', '"12"', '"1.5"', '"abc"', '""', '"True"', 'True', 'False', 'None', '[]', '[1, "a"]', '{}', '{a = 1}', '1Ki', '2M', '0x1F', '0o17', '0b101', '"  x "', '[1, [2, 3]]', '{"k": [1]}']
fns = ['int({})', 'float({})', 'str({})', 'bool({})', 'len({})', 'abs({})', 'sorted({})', 'list({})', 'dict({})', 'typeof({})', 'max({})', 'min({})', 'sum({})', 'round({})', 'hex({})', 'oct({})', 'bin({})', 'ord({})', 'chr({})', 'any({})', 'all({})', 'isunique({})', 'zip({}, [1])', 'range({})', 'int({}, 16)', 'multiplyof({}, 2)', '{} * 2', '{} + {}', '-{}', 'not {}', '{}[0]', '{}[-1]', '{}[1:]', '{}[::-1]', '"${{{}}}"', '{} == {}', '{} < {}', '{} in {}', '{} // 2', '{} % 3', '{} ** 2']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    for i in range(r.randint(1, 3)):
        f = r.choice(fns)
        k = f.count('{}')
        args = [r.choice(vals) for _ in range(k)]
        L.append(f"v{i}: any = " + f.format(*args))
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
