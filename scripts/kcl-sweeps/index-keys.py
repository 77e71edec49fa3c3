#!/usr/bin/env python3
"""Config entries that index a list (`a[0] = v`, `a[-1] += [..]`, `a[1]: {..}`, and `a.b[0]`,
which upstream's run time reads as `a[0]`) mixed with whole-key entries of one key, in a config
literal, unpacked with `**`, merged with `|` into another config and given to schemas with and
without defaults, so which index a key keeps after its last entry shows where the config is
merged later.

Usage: index-keys.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
for s in range(seed, seed + n):
    r = random.Random(s)

    def value():
        k = r.random()
        if k < 0.45:
            return '[' + ', '.join(str(r.randint(1, 9)) for _ in range(r.randint(0, 3))) + ']'
        if k < 0.7:
            return str(r.randint(1, 9))
        if k < 0.85:
            return '{c: ' + str(r.randint(1, 9)) + '}'
        return '[{c: ' + str(r.randint(1, 9)) + '}]'

    def entry():
        key = r.choice(['a', 'a', 'a', 'b'])
        if r.random() < 0.5:
            i = r.choice([0, 0, 1, 2, -1])
            key = f'{key}{r.choice(["", "", ".d"])}[{i}]'
        op = r.choice([' =', ':', ' +='])
        return f'{key}{op} {value()}'

    def config():
        es = [entry() for _ in range(r.randint(1, 4))]
        if r.random() < 0.2:
            es.insert(r.randrange(len(es) + 1), '**{' + entry() + '}')
        return '{' + ', '.join(es) + '}'

    lines = [
        'schema S:',
        '    a?: any',
        '    b?: any',
        'schema T:',
        f'    a: any = [{r.randint(1, 9)}, {r.randint(1, 9)}]',
        '    b: any = [{c: 1}]',
    ]
    for i in range(r.randint(1, 3)):
        k = r.random()
        c = config()
        if k < 0.3:
            lines.append(f'x{i} = {c}')
        elif k < 0.5:
            lines.append(f'x{i} = {{a: [1, 2, 3], b: [{{c: 1}}, {{c: 2}}]}} | {c}')
        elif k < 0.75:
            lines.append(f'x{i} = S {c}')
        else:
            lines.append(f'x{i} = T {c}')
    out.append(f'# seed {s}\n' + '\n'.join(lines) + '\n')
print('#---\n'.join(out), end='')
