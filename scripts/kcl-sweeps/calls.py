#!/usr/bin/env python3
"""Calls: lambdas with typed or untyped parameters, defaults and return types, called with
too many, too few, keyword, unknown-keyword and ill-typed arguments; reduce() over them;
calls of things that are not functions.

Usage: calls.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
types = ['', '', ': int', ': str', ': [int]', ': {str:int}', ': any', ': int | str', ': float']
vals = ['1', '2.5', '"s"', '[1]', '["a"]', '{k = 1}', 'None', 'True', '[]', '-3']
bodies = ['a', 'a + 1', 'str(a)', '[a]', '{v = a}', 'a if a else 0', 'None', '"r"', 'len(str(a))']
rets = ['', '', ' -> int', ' -> str', ' -> [int]', ' -> any', ' -> float']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    np = r.randint(0, 3)
    names = ['a', 'b', 'c'][:np]
    params = []
    seen_default = False
    for nm in names:
        p = nm + r.choice(types)
        if seen_default or r.random() < 0.25:
            p += ' = ' + r.choice(vals)
            seen_default = True
        params.append(p)
    body = r.choice(bodies) if np else r.choice(['1', '"x"', '[]', 'None'])
    L = [f'f = lambda {", ".join(params)}{r.choice(rets)} {{\n    {body}\n}}']
    for i in range(r.randint(1, 3)):
        k = r.random()
        if k < 0.6:
            args = [r.choice(vals) for _ in range(r.randint(0, 4))]
            if r.random() < 0.3 and np:
                args.append(f'{r.choice(names + ["z"])}={r.choice(vals)}')
            L.append(f'x{i} = f({", ".join(args)})')
        elif k < 0.8:
            lists = ['[1, 2]', '[]', '["a"]', '[[1], [2]]', 'x', '1']
            L.append(f'x{i} = reduce(f, {r.choice(lists)}, {r.choice(vals)})')
        elif k < 0.9:
            L.append(f'x{i} = {r.choice(["typeof(f)", "f", "[f][0](1)", "{g = f}.g(1)", "(lambda q { q })(f)"])}')
        else:
            callee = r.choice(['1', '"s"', 'None', '[1]', '{k = 1}'])
            L.append(f'x{i} = {callee}({r.choice(vals)})')
    out.append('\n'.join(L) + '\n')
print("#---\n".join(out))
