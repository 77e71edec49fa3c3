#!/usr/bin/env python3
"""What `kcl run` prints: YAML for every kind of value (strings that need quotes or block
styles, unicode, escapes, numbers of every size and form, None/Undefined in containers, empty
and nested containers, keys that need quotes), with and without -k (sorted keys), and through
yaml/json encoders.

Usage: output.py SEED N: N probes (one per seed from SEED) for scripts/kcl-probe.py."""
import random, sys
seed = int(sys.argv[1]); n = int(sys.argv[2])
out = []
strs = ['""', '" "', '"x "', '" x"', '"yes"', '"no"', '"on"', '"off"', '"y"', '"n"', '"true"', '"False"',
        '"null"', '"~"', '"1"', '"1.5"', '"1e3"', '"0x1F"', '"0o7"', '"-"', '"- a"', '"a: b"', '"a:b"',
        '"#x"', '"a #b"', '"@x"', '"`x"', '"!x"', '"&x"', '"*x"', '"%x"', '"|"', '">"', '"[1]"', '"{a}"',
        '"a\\nb"', '"a\\n"', '"\\tb"', '"a\\\\b"', '"\'q\'"', '"\\"dq\\""', '"日本語"', '"é"', '"emoji 🎉"',
        '"line1\\nline2\\n"', '"  lead\\n"', '"trail  "', '"2020-01-01"', '"12:30"', '".5"', '"+1"',
        '"=x"', '"?x"', '",x"', '"a,b"', '"NaN"', '".inf"', '"0"', '"00"', '"010"', '"1_000"', '"Yes"',
        '"""multi\nline"""', "r'\\d+'", '"\\u00e9"', '"x\\ry"', '"a" * 3', '"%"', '"{{"', '"<>"']
nums = ['0', '1', '-1', '1.0', '1.5', '-0.0', '1e10', '1e20', '1.5e-7', '3.14159265358979', '9007199254740993',
        '123456789012345', '0.1 + 0.2', '1 / 3', '2.0 * 3', '10 / 4', '7 // 2', '-7 // 2', '1Ki', '2Mi', '1.5K',
        '0x10', '0o17', '0b101', '100000000000000000.0', '1e-5', '123.0', 'float(7)', 'int(7.9)', '2 ** 62']
others = ['True', 'False', 'None', 'Undefined', '[]', '{}', '[None]', '[Undefined, 1]', '{a = None}',
          '{a = Undefined}', '[[]]', '[{}]', '{"a b" = 1}', '{"1" = 2}', '{"-x" = 3}', '{"yes" = 4}',
          '{"" = 5}', '{"a.b" = 6}', '{"日" = 7}', '{_p = 1, q = 2}', '{"$x" = 8}']
def val(r, d):
    k = r.random()
    if d > 0 and k < 0.25:
        return "[" + ", ".join(val(r, d - 1) for _ in range(r.randint(0, 3))) + "]"
    if d > 0 and k < 0.45:
        keys = r.sample(['a', 'b', 'zz', 'Key', '"k 1"', '"0"', 'x1', '_h'], r.randint(0, 3))
        return "{" + ", ".join(f"{kk} = {val(r, d - 1)}" for kk in keys) + "}"
    return r.choice(strs + nums + others)
for s in range(seed, seed + n):
    r = random.Random(s)
    L = []
    if r.random() < 0.2:
        L.append("#!args: -k")
    if r.random() < 0.3:
        L.append("import yaml\nimport json")
    for i in range(r.randint(1, 4)):
        name = r.choice([f"v{i}", f"_v{i}", f"Name{i}", f"v{i}"])
        v = val(r, 2)
        if "import yaml" in L[-1:] + L[:2] and r.random() < 0.4:
            v = r.choice([f"yaml.encode({v})", f"json.encode({v})", f"json.encode({v}, indent=2)"])
        L.append(f"{name} = {v}")
    out.append("\n".join(L) + "\n")
print("#---\n".join(out))
