#!/usr/bin/env python3
"""Numbers: literal forms (hex, octal, binary, exponents, unit suffixes, large values), every
arithmetic and bitwise operator, conversions and printing, sometimes under -r (strict range
check).

Usage: numbers.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
lits = ['0', '1', '-1', '7', '255', '0x1F', '0o17', '0b101', '1_000', '2147483647', '2147483648', '-2147483649',
        '9223372036854775807', '4611686018427387904', '1.0', '0.1', '2.5', '-0.0', '1e3', '1E-3', '3.4e38', '3.5e38',
        '1.2e-38', '1e-45', '1e308', '1.7976931348623157e308', '123456789.123', '1Ki', '2Mi', '1K', '3M', '1Gi', '5m',
        '1u', '2n', '1P', '1Ti', '0.5', '100.0', '1e16', '12345678901234567890.0', 'True', 'False']
ops = ['+', '-', '*', '/', '//', '%', '**', '<<', '>>', '&', '|', '^', '<', '<=', '==', '!=', '>', '>=']
unary = ['-', '+', '~', 'not ']
conv = ['int({})', 'float({})', 'str({})', 'bool({})', 'abs({})', 'round({})', 'round({}, 2)', 'typeof({})', '"${{{}}}"',
        '"${{{}:.2f}}"', '"{}".format({})', 'hex({})', 'oct({})', 'bin({})', 'multiplyof({}, 3)']
out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    for i in range(r.randint(1, 4)):
        k = r.random()
        a, b = r.choice(lits), r.choice(lits)
        if k < 0.5:
            e = f'{a} {r.choice(ops)} {b}'
        elif k < 0.65:
            e = f'{r.choice(unary)}{a}'
        elif k < 0.9:
            f = r.choice(conv)
            e = f.format(*([a] * f.count('{}'))) if f.count('{}') else f
        else:
            e = a
        ann = r.choice(['', '', ': int', ': float', ': any'])
        L.append(f'v{i}{ann} = {e}')
    head = '#!args: -r\n' if r.random() < 0.3 else ''
    out.append(head + '\n'.join(L) + '\n')
print("#---\n".join(out))
