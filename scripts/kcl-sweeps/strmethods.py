#!/usr/bin/env python3
"""String methods (count, find, index, split, strip, replace, title, is*, ...) with their optional
arguments (start and end positions, negative ones, None, counts), on strings with spaces, cases,
digits and non-ASCII letters; slicing and indexing of such strings; now and then an argument of
another kind.

Usage: strmethods.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
S = ['"abc"', '""', '"  a b  "', '"Hello World"', '"hello world"', '"HELLO"', '"a1b2"', '"123"', '"ünïcödé"',
     '"ÄbC"', '"a,b,,c"', '"x\\ny\\r\\nz\\n"', '"\\t tab"', '"aaa"', '"abcabc"', '"Title Case Here"', '"ǅungla"',
     '"x-y_z"', '"١٢٣"', '"ß"', '"a b\\tc\\nd"', '"   "', '"they\'re bill\'s"', '"ﬁ"']
SUB = ['"a"', '"b"', '""', '"ab"', '"abc"', '"x"', '" "', '","', '"ü"', '"l"', '"o"', '"\\n"']
POS = ['0', '1', '2', '-1', '-2', '10', '-10', 'None']

def pick(r, pool):
    return r.choice(['1', 'None', '[1]', 'True']) if r.random() < 0.05 else r.choice(pool)

def call(r):
    s = r.choice(S)
    m = r.choice(['count', 'find', 'rfind', 'index', 'rindex', 'startswith', 'endswith', 'split', 'rsplit',
                  'splitlines', 'strip', 'lstrip', 'rstrip', 'replace', 'removeprefix', 'removesuffix', 'upper',
                  'lower', 'capitalize', 'title', 'isalnum', 'isalpha', 'isdigit', 'islower', 'isupper',
                  'isspace', 'istitle', 'join', 'slice', 'index_at', 'ops'])
    if m in ('count', 'find', 'rfind', 'index', 'rindex', 'startswith', 'endswith'):
        args = [pick(r, SUB)]
        if m in ('startswith', 'endswith') and r.random() < 0.2:
            args = ['[' + ', '.join(r.choice(SUB) for _ in range(2)) + ']']
        for _ in range(r.choice([0, 0, 1, 2])):
            args.append(pick(r, POS))
        return f'{s}.{m}({", ".join(args)})'
    if m in ('split', 'rsplit'):
        args = []
        if r.random() < 0.7: args.append(pick(r, SUB + ['None']))
        if r.random() < 0.4: args.append(pick(r, ['0', '1', '2', '-1']))
        if r.random() < 0.3 and args:
            kw = ['sep', 'maxsplit']
            args = [f'{k}={v}' for k, v in zip(kw, args)]
        return f'{s}.{m}({", ".join(args)})'
    if m == 'splitlines':
        return f'{s}.splitlines({r.choice(["", "True", "False", "keepends=True"])})'
    if m in ('strip', 'lstrip', 'rstrip'):
        chars = r.choice(['', '', pick(r, SUB), 'None', '"ab "'])
        return f'{s}.{m}({chars})'
    if m == 'replace':
        args = [pick(r, SUB), pick(r, SUB)] + ([pick(r, ['0', '1', '-1', '2'])] if r.random() < 0.4 else [])
        return f'{s}.replace({", ".join(args)})'
    if m in ('removeprefix', 'removesuffix'):
        return f'{s}.{m}({pick(r, SUB)})'
    if m == 'join':
        items = '[' + ', '.join(r.choice(S) for _ in range(r.randint(0, 3))) + ']'
        if r.random() < 0.1: items = '[1, "a"]'
        return f'{pick(r, SUB)}.join({items})'
    if m == 'slice':
        a, b, c = (r.choice(['', '0', '1', '-1', '-3', '2', '10', '-10']) for _ in range(3))
        step = r.choice(['', ':' + c, ':-1', ':2', ':-2'])
        return f'{s}[{a}:{b}{step}]'
    if m == 'index_at':
        return f'{s}[{r.choice(["0", "-1", "1", "3", "-4", "100"])}]'
    if m == 'ops':
        t = r.choice(S)
        return r.choice([f'{s} * {r.choice(["0", "2", "-1"])}', f'{s} + {t}', f'{s} < {t}', f'{s} in {t}',
                         f'len({s})', f'sorted({s})', f'list({s})', f'{s} == {t}', f'max({s})', f'"{{}}|{{}}".format({s}, {t})',
                         f'[c for c in {s}]', f'{s} % 2' if r.random() < 0.1 else f'{s} >= {t}'])
    return f'{s}.{m}()'

out = []
for s in range(seed, seed + n):
    r = random.Random(s)
    out.append('\n'.join(f'v{i} = {call(r)}' for i in range(r.randint(1, 4))) + '\n')
print("#---\n".join(out))
