#!/usr/bin/env python3
"""Command-line options over one small program: -D with option(), -S path selectors, -O
overrides, -k, -n, -H, -r, on schemas with hidden, optional and None-valued attributes.

Usage: cli.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
opt_values = ['1', '-3', '2.5', '"s"', 'True', 'False', 'None', '[1,2]', '{"a":1}', 'abc', '1e3', '0x10', '"1"']
opt_calls = ['option("v")', 'option("v", default=1)', 'option("v", type="int")', 'option("v", type="str", default="d")',
             'option("v", type="float")', 'option("v", type="bool")', 'option("v", type="list")', 'option("v", type="dict")',
             'option("v", required=True)', 'option("v", help="the v")', 'option("w", default=[1])']
selectors = ['p', 'p.name', 'data', 'data.labels', 'data.labels.key1', 'data.items', 'q', 'v', '_y', 'p.labels', 'nope', 'p.age', 'data.items.0']
overrides = ['p.name="y"', 'p.name=y', 'data.labels.key2=value2', 'data.labels.key1-', 'p.age=3', 'p.age-', 'z=1', 'z-',
             'data.items=[3]', 'q.a=2', 'newkey=1', 'p.labels={"x":"1"}', 'data={"n":1}', 'p=Person{name="w"}', 'v=5', '_y=3']
bools = ['-k', '-n', '-H', '-r']
bodies = [
    'schema Person:\n    name: str = "a"\n    age?: int\n    _hidden: int = 1\n    labels: {str:str} = {}\n    nothing?: str = None\n',
    'schema Person:\n    name: str\n    age: int = 2\n    labels?: {str:str}\n    _h = [1]\n',
]
glob = ['p = Person {name = "x"}', 'p = Person {name = "x", labels.k = "v"}', 'q = {a = 1, b = None, _c = 2}',
        'data = {labels = {key1 = "v"}, items = [1, 2]}', '_y = 2', 'z = None', 'big = 2147483648', 'f = 3.4e39', 'neg = -2147483649',
        'e = []', 'd = {}', 'zz = {b = 1, a = 2}']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    args = []
    if r.random() < 0.5:
        args += ['-D', 'v=' + r.choice(opt_values)]
    for _ in range(r.randint(0, 2)):
        args += ['-S', r.choice(selectors)]
    for _ in range(r.randint(0, 2)):
        args += ['-O', r.choice(overrides)]
    args += r.sample(bools, r.randint(0, 2))
    src = r.choice(bodies)
    src += '\n'.join(r.sample(glob, r.randint(2, 6))) + '\n'
    if 'p = ' not in src:
        src += 'p = Person {name = "n"}\n'
    if r.random() < 0.7:
        src += 'v = ' + r.choice(opt_calls) + '\n'
    head = ('#!args: ' + ' '.join(args) + '\n') if args else ''
    out.append(head + src)
print("#---\n".join(out))
