//! Signatures and one-line docs of the builtin functions, the system modules' functions and the
//! string methods, for completion, hover and signature help. The evaluator's natives carry no
//! signatures, so they are written down here (upstream's documented API).

use std::sync::OnceLock;

/// One function: `name(params) -> ret`, and what it does.
#[derive(Debug)]
pub struct FnSig {
    /// The function name (without its module).
    pub name: &'static str,
    /// Parameters as written in the signature (`name: type` or `name: type = default`).
    pub params: Vec<&'static str>,
    /// Return type.
    pub ret: &'static str,
    /// One line of documentation.
    pub doc: &'static str,
}

impl FnSig {
    /// `name(a: int, b: str) -> ret`.
    pub fn label(&self, module: Option<&str>) -> String {
        let prefix = module.map(|m| format!("{m}.")).unwrap_or_default();
        format!(
            "{prefix}{}({}) -> {}",
            self.name,
            self.params.join(", "),
            self.ret
        )
    }
    /// The parameter's name (the text before `:`/`=`).
    pub fn param_name(p: &str) -> &str {
        p.split([':', '='])
            .next()
            .unwrap_or(p)
            .trim()
            .trim_start_matches('*')
    }
}

// Each line: `name(param, ...) -> ret | doc`.
const BUILTINS: &str = "\
print(*args: any, sep: str = \" \", end: str = \"\\n\") -> None | Prints the values to standard error, separated by sep and followed by end.
len(inval: str | [] | {:}) -> int | The number of items of a collection or characters of a string.
sum(iterable: [], start: any = 0) -> any | Sums start and the items of a list.
max(*args: any) -> any | The largest item of a list, or the largest argument.
min(*args: any) -> any | The smallest item of a list, or the smallest argument.
abs(x: int | float) -> int | float | The absolute value of a number.
int(number: any, base: int = 10) -> int | Converts a number or string to an integer.
float(number: any) -> float | Converts a number or string to a float.
str(x: any) -> str | The string form of a value.
bool(x: any) -> bool | The truth value of a value.
list(x: any) -> [] | A list of the items of an iterable.
dict(x: any, **kwargs: any) -> {:} | A dict from a mapping or keyword arguments.
typeof(x: any, full_name: bool = False) -> str | The type name of a value.
option(key: str, type: str = \"\", required: bool = False, default: any = None, help: str = \"\") -> any | The value of a top-level argument given with -D key=value.
multiplyof(a: int, b: int) -> bool | Whether a is a multiple of b.
isunique(inval: []) -> bool | Whether every item of a list is unique.
sorted(inval: [], reverse: bool = False) -> [] | A new sorted list of the items.
range(start: int, end: int = None, step: int = 1) -> [int] | The integers from start (0) below end, by step.
zip(*args: []) -> [] | Lists of the n-th items of each list.
all_true(inval: []) -> bool | Whether every item is truthy.
any_true(inval: []) -> bool | Whether any item is truthy.
ord(c: str) -> int | The Unicode code point of a one-character string.
hex(number: int) -> str | The hexadecimal form of an integer (0x...).
oct(number: int) -> str | The octal form of an integer (0o...).
bin(number: int) -> str | The binary form of an integer (0b...).
round(number: int | float, ndigits: int = None) -> int | float | A number rounded to ndigits decimals.
pow(x: int | float, y: int | float, z: int = None) -> int | float | x to the power y (modulo z).
isnullish(inval: any) -> bool | Whether the value is None or Undefined.
";

const SYSTEM: &[(&str, &str)] = &[
    (
        "base64",
        "\
encode(value: str) -> str | The base64 encoding of a string.
decode(value: str) -> str | The string a base64 text encodes.
",
    ),
    (
        "base32",
        "\
encode(value: str) -> str | The base32 encoding of a string.
decode(value: str) -> str | The string a base32 text encodes.
",
    ),
    (
        "math",
        "\
ceil(x: int | float) -> int | The smallest integer not below x.
floor(x: int | float) -> int | The largest integer not above x.
trunc(x: int | float) -> int | x without its fractional part.
exp(x: int | float) -> float | e to the power x.
expm1(x: int | float) -> float | exp(x) - 1.
log(x: int | float, base: float = 2.718281828459045) -> float | The logarithm of x to base.
log1p(x: int | float) -> float | log(1 + x).
log2(x: int | float) -> float | The base-2 logarithm of x.
log10(x: int | float) -> float | The base-10 logarithm of x.
pow(x: int | float, y: int | float) -> float | x to the power y.
sqrt(x: int | float) -> float | The square root of x.
factorial(x: int) -> int | x factorial.
gcd(a: int, b: int) -> int | The greatest common divisor.
modf(x: float) -> [float] | The fractional and integer parts of x.
fabs(x: int | float) -> float | The absolute value as a float.
isfinite(x: int | float) -> bool | Whether x is neither infinite nor NaN.
isinf(x: int | float) -> bool | Whether x is infinite.
isnan(x: int | float) -> bool | Whether x is NaN.
",
    ),
    (
        "regex",
        "\
match(string: str, pattern: str) -> bool | Whether the pattern matches at the start of the string.
search(string: str, pattern: str) -> bool | Whether the pattern matches anywhere in the string.
compile(pattern: str) -> bool | Whether the pattern is a valid regular expression.
replace(string: str, pattern: str, replace: str, count: int = 0) -> str | The string with matches of pattern replaced.
split(string: str, pattern: str, maxsplit: int = 0) -> [str] | The string split at matches of the pattern.
findall(string: str, pattern: str) -> [str] | Every match of the pattern.
",
    ),
    (
        "json",
        "\
encode(data: any, sort_keys: bool = False, indent: int = None, ignore_private: bool = False, ignore_none: bool = False) -> str | A value as JSON text.
decode(value: str) -> any | The value a JSON text holds.
validate(value: str) -> bool | Whether the text is valid JSON.
merge(src: any, patch: any) -> any | src with the JSON merge patch applied (RFC 7386: a None removes a key).
dump_to_file(data: any, filename: str, sort_keys: bool = False, indent: int = None, ignore_private: bool = False, ignore_none: bool = False) -> None | Writes a value as JSON to a file.
",
    ),
    (
        "yaml",
        "\
encode(data: any, sort_keys: bool = False, ignore_private: bool = False, ignore_none: bool = False) -> str | A value as YAML text.
encode_all(data: [], sort_keys: bool = False, ignore_private: bool = False, ignore_none: bool = False) -> str | Values as a YAML stream.
decode(value: str) -> any | The value a YAML text holds.
decode_all(value: str) -> [any] | The values of a YAML stream.
validate(value: str) -> bool | Whether the text is valid YAML.
dump_to_file(data: any, filename: str, sort_keys: bool = False, ignore_private: bool = False, ignore_none: bool = False) -> None | Writes a value as YAML to a file.
dump_all_to_file(data: [], filename: str, sort_keys: bool = False, ignore_private: bool = False, ignore_none: bool = False) -> None | Writes values as a YAML stream to a file.
",
    ),
    (
        "manifests",
        "\
yaml_stream(values: [], opts: {str:} = {}) -> None | Outputs the values as a YAML stream (sort_keys, ignore_private, ignore_none, sep).
",
    ),
    (
        "units",
        "\
to_n(num: int) -> str | The number in nano units (n).
to_u(num: int) -> str | The number in micro units (u).
to_m(num: int) -> str | The number in milli units (m).
to_K(num: int) -> str | The number in kilo units (K).
to_M(num: int) -> str | The number in mega units (M).
to_G(num: int) -> str | The number in giga units (G).
to_T(num: int) -> str | The number in tera units (T).
to_P(num: int) -> str | The number in peta units (P).
to_Ki(num: int) -> str | The number in kibi units (Ki).
to_Mi(num: int) -> str | The number in mebi units (Mi).
to_Gi(num: int) -> str | The number in gibi units (Gi).
to_Ti(num: int) -> str | The number in tebi units (Ti).
to_Pi(num: int) -> str | The number in pebi units (Pi).
",
    ),
    (
        "crypto",
        "\
md5(value: str, encoding: str = \"utf-8\") -> str | The MD5 digest (hex).
sha1(value: str, encoding: str = \"utf-8\") -> str | The SHA-1 digest (hex).
sha224(value: str, encoding: str = \"utf-8\") -> str | The SHA-224 digest (hex).
sha256(value: str, encoding: str = \"utf-8\") -> str | The SHA-256 digest (hex).
sha384(value: str, encoding: str = \"utf-8\") -> str | The SHA-384 digest (hex).
sha512(value: str, encoding: str = \"utf-8\") -> str | The SHA-512 digest (hex).
blake3(value: str, encoding: str = \"utf-8\") -> str | The BLAKE3 digest (hex).
uuid() -> str | A random UUID.
filesha256(filepath: str) -> str | The SHA-256 digest of a file (hex).
",
    ),
    (
        "datetime",
        "\
now(format: str = \"%a %b %d %H:%M:%S %Y\") -> str | The local time, formatted.
today() -> str | The local date and time.
ticks() -> float | Seconds since the epoch.
date() -> str | The local date and time (%Y-%m-%d %H:%M:%S).
validate(date: str, format: str) -> bool | Whether the date has the format.
is_iso8601(date: str) -> bool | Whether the text is an ISO 8601 date and time (as RFC 3339).
is_rfc3339(date: str) -> bool | Whether the text is an RFC 3339 date and time.
",
    ),
    (
        "net",
        "\
split_host_port(ip_end_point: str) -> [str] | Host and port of host:port.
join_host_port(host: str, port: int | str) -> str | host:port.
fqdn(name: str = \"\") -> str | The fully qualified domain name.
parse_IP(ip: str) -> str | The IP address in canonical form (empty when invalid).
to_IP4(ip: str) -> str | The IPv4 form of an address.
to_IP6(ip: str) -> str | The IPv6 form of an address.
IP_string(ip: str) -> str | The address as a string.
is_IPv4(ip: str) -> bool | Whether the address is IPv4.
is_IP(ip: str) -> bool | Whether the text is an IP address.
is_loopback_IP(ip: str) -> bool | Whether the address is a loopback address.
is_multicast_IP(ip: str) -> bool | Whether the address is a multicast address.
is_interface_local_multicast_IP(ip: str) -> bool | Whether the address is an interface-local multicast address.
is_link_local_multicast_IP(ip: str) -> bool | Whether the address is a link-local multicast address.
is_link_local_unicast_IP(ip: str) -> bool | Whether the address is a link-local unicast address.
is_global_unicast_IP(ip: str) -> bool | Whether the address is a global unicast address.
is_unspecified_IP(ip: str) -> bool | Whether the address is the unspecified address.
parse_CIDR(cidr: str) -> {str:} | The network's first address (`ip`) and prefix length (`mask`); empty when invalid.
is_IP_in_CIDR(ip: str, cidr: str) -> bool | Whether the address is in the network.
CIDR_host(cidr: str, host_num: int) -> str | The address numbered host_num in the network (negative from the end).
CIDR_netmask(cidr: str) -> str | The IPv4 network's mask in dotted form.
CIDR_subnet(cidr: str, additional_bits: int, net_num: int) -> str | Subnet net_num of additional_bits more bits.
CIDR_subnets(cidr: str, additional_bits: [int]) -> [str] | Consecutive subnets of the given extra bits.
",
    ),
    (
        "file",
        "\
read(filepath: str) -> str | The text of a file.
glob(pattern: str) -> [str] | The paths matching a glob pattern.
modpath() -> str | The root of the current package (its kcl.mod folder).
workdir() -> str | The working folder.
current() -> str | The path of the current file.
exists(filepath: str) -> bool | Whether the path exists.
abs(filepath: str) -> str | The absolute path.
mkdir(directory: str, exists: bool = False) -> None | Creates a folder.
delete(filepath: str) -> None | Deletes a file.
cp(src: str, dest: str) -> None | Copies a file, or a folder into a folder.
mv(src: str, dest: str) -> None | Moves a file or folder.
size(filepath: str) -> int | The size of a file in bytes.
write(filepath: str, content: str) -> None | Writes text to a file.
append(filepath: str, content: str) -> None | Adds text to the end of a file (made when missing).
read_env(key: str) -> str | The value of an environment variable.
",
    ),
    (
        "template",
        "\
execute(template: str, data: {str:} = {}) -> str | Renders a Handlebars template with data.
html_escape(data: str) -> str | The text with HTML special characters escaped.
",
    ),
    (
        "runtime",
        "\
catch(func: () -> any) -> str | Runs func and returns the message of the error it raises (Undefined when none).
",
    ),
    (
        "collection",
        "\
union_all(num: [any]) -> any | Declared, but upstream's runtime has no such function: every call fails.
",
    ),
];

const STR_METHODS: &str = "\
capitalize() -> str | The string with its first character upper case and the rest lower case.
chars() -> [str] | The characters of the string.
count(sub: str, start: int = 0, end: int = None) -> int | Occurrences of sub.
endswith(val: str, start: int = 0, end: int = None) -> bool | Whether the string ends with val.
find(sub: str, start: int = 0, end: int = None) -> int | The lowest index of sub, or -1.
format(*args: any, **kwargs: any) -> str | The string with {} fields replaced.
index(sub: str, start: int = 0, end: int = None) -> int | The lowest index of sub (an error when absent).
isalnum() -> bool | Whether every character is alphanumeric.
isalpha() -> bool | Whether every character is alphabetic.
isdigit() -> bool | Whether every character is a digit.
islower() -> bool | Whether every cased character is lower case.
isspace() -> bool | Whether every character is whitespace.
istitle() -> bool | Whether the string is title-cased.
isupper() -> bool | Whether every cased character is upper case.
join(iter: [str]) -> str | The items joined with the string.
lower() -> str | The string in lower case.
upper() -> str | The string in upper case.
lstrip(chars: str = None) -> str | The string without leading characters.
rstrip(chars: str = None) -> str | The string without trailing characters.
strip(chars: str = None) -> str | The string without leading and trailing characters.
replace(old: str, new: str, count: int = None) -> str | The string with old replaced by new.
removeprefix(prefix: str) -> str | The string without the prefix.
removesuffix(suffix: str) -> str | The string without the suffix.
rfind(sub: str, start: int = 0, end: int = None) -> int | The highest index of sub, or -1.
rindex(sub: str, start: int = 0, end: int = None) -> int | The highest index of sub (an error when absent).
split(sep: str = None, maxsplit: int = -1) -> [str] | The words of the string.
rsplit(sep: str = None, maxsplit: int = -1) -> [str] | The words, split from the right.
splitlines(keepends: bool = False) -> [str] | The lines of the string.
startswith(val: str, start: int = 0, end: int = None) -> bool | Whether the string starts with val.
title() -> str | The string title-cased.
";

fn parse(table: &'static str) -> Vec<FnSig> {
    table
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (sig, doc) = l.rsplit_once(" | ")?;
            let open = sig.find('(')?;
            let close = sig.rfind(')')?;
            let name = &sig[..open];
            let inner = &sig[open + 1..close];
            let ret = sig[close + 1..].trim().trim_start_matches("->").trim();
            Some(FnSig {
                name,
                params: split_params(inner),
                ret,
                doc,
            })
        })
        .collect()
}

/// Splits a parameter list at top-level commas (defaults may hold commas in strings or
/// brackets).
fn split_params(s: &'static str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let (mut depth, mut quote, mut start) = (0i32, false, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quote = !quote,
            '[' | '{' | '(' if !quote => depth += 1,
            ']' | '}' | ')' if !quote => depth -= 1,
            ',' if !quote && depth == 0 => {
                out.push(s[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if !s[start..].trim().is_empty() {
        out.push(s[start..].trim());
    }
    out
}

struct Tables {
    builtins: Vec<FnSig>,
    system: Vec<(&'static str, Vec<FnSig>)>,
    str_methods: Vec<FnSig>,
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| Tables {
        builtins: parse(BUILTINS),
        system: SYSTEM.iter().map(|(m, t)| (*m, parse(t))).collect(),
        str_methods: parse(STR_METHODS),
    })
}

/// The builtin functions.
pub fn builtins() -> &'static [FnSig] {
    &tables().builtins
}

/// A builtin function by name.
pub fn builtin(name: &str) -> Option<&'static FnSig> {
    builtins().iter().find(|f| f.name == name)
}

/// The functions of a system module.
pub fn system_module(module: &str) -> &'static [FnSig] {
    tables()
        .system
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, f)| f.as_slice())
        .unwrap_or(&[])
}

/// A system module's function by name.
pub fn system_function(module: &str, name: &str) -> Option<&'static FnSig> {
    system_module(module).iter().find(|f| f.name == name)
}

/// The string methods.
pub fn str_methods() -> &'static [FnSig] {
    &tables().str_methods
}

/// A string method by name.
pub fn str_method(name: &str) -> Option<&'static FnSig> {
    str_methods().iter().find(|f| f.name == name)
}

/// Constants of the `math` module (not functions).
pub const MATH_CONSTANTS: &[(&str, &str)] = &[
    ("e", "float"),
    ("pi", "float"),
    ("inf", "float"),
    ("nan", "float"),
    ("tau", "float"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_line_parses() {
        assert_eq!(builtins().len(), BUILTINS.lines().count());
        for (m, t) in SYSTEM {
            assert_eq!(system_module(m).len(), t.lines().count(), "{m}");
        }
        assert_eq!(str_methods().len(), STR_METHODS.lines().count());
        let p = builtin("print").map(|f| f.params.clone());
        assert_eq!(
            p,
            Some(vec!["*args: any", "sep: str = \" \"", "end: str = \"\\n\""])
        );
        assert_eq!(FnSig::param_name("*args: any"), "args");
        // every system module of the loader has its table
        for m in crate::parser::loader::SYSTEM_MODULES {
            assert!(!system_module(m).is_empty(), "{m}");
        }
    }
}
