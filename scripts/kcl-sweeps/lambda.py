#!/usr/bin/env python3
"""Lambdas: closures, defaults and keyword arguments, lambdas in schemas and loops, higher-order calls, multi-statement bodies.

Usage: lambda.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    L.append(f"g = {r.randint(1, 9)}")
    ann = r.random() < 0.5
    def ty(t): return f": {t}" if ann else ""
    kind = r.randint(0, 6)
    if kind == 0:  # closure returning lambda
        L.append(f"make = lambda x{ty('int')} {{\n    lambda y{ty('int')} {{\n        x + y + g\n    }}\n}}")
        L.append(f"f = make({r.randint(0,5)})")
        L.append(f"a = f({r.randint(0,5)})")
        L.append(f"b = [make(i)(i) for i in range({r.randint(0,4)})]")
    elif kind == 1:  # default args and kwargs
        L.append(f"f = lambda x{ty('int')}, y{ty('int')} = {r.randint(0,3)} {{\n    x * y\n}}")
        L.append(f"a = f({r.randint(0,5)})")
        L.append(f"b = f({r.randint(0,5)}, y={r.randint(0,5)})")
        L.append(f"c = f(x={r.randint(0,5)})")
    elif kind == 2:  # in schema
        L.append("schema S:")
        L.append(f"    base{ty('int')} = {r.randint(1,5)}")
        L.append(f"    fn = lambda v {{ v + base }}")
        L.append(f"    out = [fn(i) for i in range({r.randint(0,3)})]")
        L.append(f"    _h = lambda {{ base * 2 }}")
        L.append(f"    h = _h()")
        L.append(f"s = S {{base = {r.randint(1,9)}}}")
        L.append(f"t = S {{}}")
    elif kind == 3:  # in for loops capturing loop var
        L.append(f"fs = [lambda x {{ x + i }} for i in range({r.randint(1,3)})]")
        L.append(f"a = [f(10) for f in fs]")
    elif kind == 4:  # recursive-ish / higher-order
        L.append(f"apply = lambda f, v {{ f(v) }}")
        L.append(f"inc = lambda x {{ x + 1 }}")
        L.append(f"a = apply(inc, {r.randint(0,9)})")
        L.append(f"b = apply(lambda x {{ x * g }}, {r.randint(0,9)})")
        L.append(f"c = [apply(inc, x) for x in [1, 2]]")
    elif kind == 5:  # multi-statement bodies
        L.append(f"f = lambda x{ty('int')} {{\n    _y = x * 2\n    if _y > {r.randint(0,10)}:\n        _y = _y - 1\n    _z = [_y]\n    _z + [g]\n}}")
        L.append(f"a = f({r.randint(0,9)})")
    else:  # lambda returning config / schema
        L.append("schema P:\n    n: int = 0\n    m?: str")
        L.append(f"mk = lambda n{ty('int')} {{\n    P {{n = n, m = \"${{n}}\"}}\n}}")
        L.append(f"a = mk({r.randint(0,9)})")
        L.append(f"b = [mk(i) for i in range(2)]")
        L.append(f"c = {{\"k${{i}}\": mk(i).n for i in range(2)}}")
    if r.random() < 0.3:
        L.append("import json\nj = json.encode({k = g})")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
