//! A grammar-directed generator of random, mostly well-typed KCL programs: schemas with
//! inheritance, mixins, `check:` blocks, index signatures, defaults and derived attributes;
//! lambdas, comprehensions, quantifiers, config operators (`:`, `=`, `+=`, dotted keys,
//! unpacking, `if` entries, `|`); `instances()`; top-level declarations repeated across the
//! files of a multi-file main package; and imported packages with schemas named like the main
//! package's. Every choice comes from a seeded [`Rng`], so a seed reproduces its program.
//!
//! Over 800 lines: one generator; its productions call one another and share the seeded
//! [`Rng`] and the names defined so far, so splitting it would pass that state across files.

use super::oracle::Program;

/// splitmix64: small, fast, and good enough to drive a generator.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Ty {
    Int,
    Float,
    Str,
    Bool,
    List(Box<Ty>),
    Dict(Box<Ty>),
    Schema(usize),
}

impl Ty {
    fn annot(&self, g: &Gen) -> String {
        match self {
            Ty::Int => "int".into(),
            Ty::Float => "float".into(),
            Ty::Str => "str".into(),
            Ty::Bool => "bool".into(),
            Ty::List(t) => format!("[{}]", t.annot(g)),
            Ty::Dict(t) => format!("{{str:{}}}", t.annot(g)),
            Ty::Schema(i) => g.schemas[*i].qualified(g.cur_pkg.as_deref()),
        }
    }
}

#[derive(Clone, Debug)]
struct Field {
    name: String,
    ty: Ty,
    /// Always set on an instance (required, or with a default).
    set: bool,
    /// Declared with a type (a config may set it); derived attributes are not.
    config: bool,
}

#[derive(Clone, Debug)]
struct SchemaInfo {
    name: String,
    /// `None`: the main package; else the imported package's name.
    pkg: Option<String>,
    fields: Vec<Field>,
    /// Extra keys through an index signature: its value type.
    index: Option<Ty>,
    /// A `schema S[n: int]` parameter.
    param: bool,
    /// Required fields (without default) the config must give.
    required: Vec<usize>,
}

impl SchemaInfo {
    fn qualified(&self, from: Option<&str>) -> String {
        match (&self.pkg, from) {
            (Some(p), Some(f)) if p == f => self.name.clone(),
            (Some(p), _) => format!("{p}.{}", self.name),
            (None, _) => self.name.clone(),
        }
    }
}

/// Generator state for one program.
pub struct Gen {
    rng: Rng,
    schemas: Vec<SchemaInfo>,
    /// Globals of the main package usable from main files: name, type.
    globals: Vec<(String, Ty)>,
    /// Lambdas: name, parameter types, result type.
    lambdas: Vec<(String, Vec<Ty>, Ty)>,
    /// Package being generated (`None`: main).
    cur_pkg: Option<String>,
    /// Loop variables and lambda parameters in scope.
    locals: Vec<(String, Ty)>,
    counter: usize,
    /// Schemas used with `instances()`.
    pub instances_used: bool,
    /// The instance being written is a statement's value (it may span lines).
    multiline: bool,
    /// System modules the feature statements use (imported by every main file).
    imports: Vec<&'static str>,
}

const WORDS: &[&str] = &[
    "web",
    "api",
    "db",
    "x-1",
    "Hello World",
    "",
    "yes",
    "no",
    "on",
    "off",
    "null",
    "~",
    "1.0",
    "0x1F",
    "true",
    "a: b",
    "#tag",
    "-dash",
    "multi\\nline",
    "tab\\tx",
    "dq\\\"x",
    "ünï",
    "100Mi",
    "1e3",
    "007",
    "*",
    "&a",
    "[x]",
    "{y}",
    "@at",
    "%p",
    "a,b",
    " lead",
    "trail ",
    "it's",
];

const NAMES: &[&str] = &[
    "name", "port", "replicas", "image", "labels", "env", "enabled", "ratio", "tags", "owner",
    "region", "size", "count", "mode", "items", "spec", "meta", "level", "weight", "prefix",
];

const SCHEMA_NAMES: &[&str] = &[
    "App",
    "Service",
    "Container",
    "Volume",
    "Config",
    "Probe",
    "Spec",
    "Meta",
    "Port",
    "Rule",
];

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            schemas: Vec::new(),
            globals: Vec::new(),
            lambdas: Vec::new(),
            cur_pkg: None,
            locals: Vec::new(),
            counter: 0,
            instances_used: false,
            multiline: false,
            imports: Vec::new(),
        }
    }

    fn fresh(&mut self, base: &str) -> String {
        self.counter += 1;
        format!("{base}{}", self.counter)
    }

    fn scalar_ty(&mut self) -> Ty {
        match self.rng.below(10) {
            0..=3 => Ty::Int,
            4..=6 => Ty::Str,
            7 => Ty::Float,
            _ => Ty::Bool,
        }
    }

    fn any_ty(&mut self, depth: u32) -> Ty {
        match self.rng.below(10) {
            0..=5 => self.scalar_ty(),
            6 | 7 if depth > 0 => Ty::List(Box::new(self.any_ty(depth - 1))),
            8 if depth > 0 => Ty::Dict(Box::new(self.any_ty(depth - 1))),
            9 if !self.visible_schemas().is_empty() => {
                let v = self.visible_schemas();
                Ty::Schema(*self.rng.pick(&v))
            }
            _ => self.scalar_ty(),
        }
    }

    /// Schemas a reference from the current package can name.
    fn visible_schemas(&self) -> Vec<usize> {
        (0..self.schemas.len())
            .filter(|&i| match (&self.cur_pkg, &self.schemas[i].pkg) {
                (None, _) => true,
                (Some(c), Some(p)) => c == p,
                (Some(_), None) => false,
            })
            .collect()
    }

    fn str_lit(&mut self) -> String {
        let w = *self.rng.pick(WORDS);
        // now and then a triple-quoted string over indented lines: upstream strips their
        // common indentation (the closing quotes' line counts)
        if self.rng.chance(4) {
            let w2 = *self.rng.pick(WORDS);
            let [a, b, close] = [0; 3].map(|_| " ".repeat(self.rng.below(7)));
            return format!("\"\"\"\n{a}{w}\n{b}{w2}\n{close}\"\"\"");
        }
        format!("\"{w}\"")
    }

    fn float_lit(&mut self) -> String {
        let whole = self.rng.int(-20, 99);
        match self.rng.below(4) {
            0 => format!("{whole}.0"),
            1 => format!("{whole}.5"),
            2 => format!("{whole}.{}", self.rng.int(1, 99)),
            _ => format!("{}.25", whole.abs()),
        }
    }

    /// Variables (locals first, then globals) of type `t`.
    fn vars_of(&self, t: &Ty) -> Vec<String> {
        let mut v: Vec<String> = self
            .locals
            .iter()
            .filter(|(_, lt)| lt == t)
            .map(|(n, _)| n.clone())
            .collect();
        if self.cur_pkg.is_none() {
            v.extend(
                self.globals
                    .iter()
                    .filter(|(_, gt)| gt == t)
                    .map(|(n, _)| n.clone()),
            );
        }
        v
    }

    /// Paths `var.field` of type `t` through schema-typed variables.
    fn field_paths(&self, t: &Ty) -> Vec<String> {
        let mut out = Vec::new();
        let mut roots: Vec<(String, Ty)> = self.locals.clone();
        if self.cur_pkg.is_none() {
            roots.extend(self.globals.iter().cloned());
        }
        for (n, rt) in roots {
            if let Ty::Schema(i) = rt {
                for f in self.all_fields(i) {
                    // derived attributes are not known to upstream's resolver
                    if f.set && f.config && &f.ty == t {
                        out.push(format!("{n}.{}", f.name));
                    }
                }
            }
        }
        out
    }

    fn all_fields(&self, i: usize) -> Vec<Field> {
        self.schemas[i].fields.clone()
    }

    /// An expression of type `t`.
    fn expr(&mut self, t: &Ty, depth: u32) -> String {
        if depth > 0 || self.rng.chance(30) {
            let vars = self.vars_of(t);
            if !vars.is_empty() && self.rng.chance(35) {
                return self.rng.pick(&vars).clone();
            }
            let paths = self.field_paths(t);
            if !paths.is_empty() && self.rng.chance(25) {
                return self.rng.pick(&paths).clone();
            }
            let lams: Vec<(String, Vec<Ty>)> = self
                .lambdas
                .iter()
                .filter(|(_, _, r)| r == t)
                .map(|(n, ps, _)| (n.clone(), ps.clone()))
                .collect();
            if self.cur_pkg.is_none() && !lams.is_empty() && depth > 0 && self.rng.chance(15) {
                let (n, ps) = self.rng.pick(&lams).clone();
                let args: Vec<String> = ps.iter().map(|p| self.expr(p, depth - 1)).collect();
                return format!("{n}({})", args.join(", "));
            }
        }
        let d = depth.saturating_sub(1);
        match t {
            Ty::Int => self.int_expr(depth),
            Ty::Float => self.float_expr(depth),
            Ty::Str => self.str_expr(depth),
            Ty::Bool => self.bool_expr(depth),
            Ty::List(et) => self.list_expr(et, depth),
            Ty::Dict(vt) => self.dict_expr(vt, depth),
            Ty::Schema(i) => {
                let i = *i;
                self.instance(i, d)
            }
        }
    }

    fn int_expr(&mut self, depth: u32) -> String {
        if depth == 0 {
            return self.rng.int(-30, 300).to_string();
        }
        let d = depth - 1;
        match self.rng.below(18) {
            14 => {
                let m = *self.rng.pick(&["find", "count", "rfind"]);
                let a = *self.rng.pick(&["a", "-", "", "x"]);
                format!("{}.{m}(\"{a}\")", self.expr(&Ty::Str, d))
            }
            15 => {
                let f = *self.rng.pick(&["min", "max"]);
                format!("{f}({})", self.expr(&Ty::List(Box::new(Ty::Int)), d))
            }
            16 => format!(
                "{}[{}]",
                self.expr(&Ty::List(Box::new(Ty::Int)), d),
                self.rng.int(-2, 2)
            ),
            17 => {
                let vt = self.scalar_ty();
                match self.rng.below(3) {
                    0 => format!("len({})", self.expr(&Ty::Dict(Box::new(vt)), d)),
                    1 => format!(
                        "len({}.split(\"{}\"))",
                        self.expr(&Ty::Str, d),
                        self.rng.pick(&["a", " ", ","])
                    ),
                    _ => format!(
                        "{}.get(\"{}\", {})",
                        self.expr(&Ty::Dict(Box::new(Ty::Int)), d),
                        self.key(),
                        self.rng.int(-5, 5)
                    ),
                }
            }
            0 => format!("{} + {}", self.expr(&Ty::Int, d), self.expr(&Ty::Int, d)),
            1 => format!("{} - {}", self.expr(&Ty::Int, d), self.expr(&Ty::Int, d)),
            2 => format!("({}) * {}", self.expr(&Ty::Int, d), self.rng.int(-3, 9)),
            3 => format!("({}) // {}", self.expr(&Ty::Int, d), self.rng.int(1, 7)),
            4 => format!("({}) % {}", self.expr(&Ty::Int, d), self.rng.int(1, 7)),
            5 => format!("len({})", self.expr(&Ty::Str, d)),
            6 => {
                let et = self.scalar_ty();
                format!("len({})", self.expr(&Ty::List(Box::new(et)), d))
            }
            7 => format!("sum({})", self.expr(&Ty::List(Box::new(Ty::Int)), d)),
            8 => format!(
                "{} if {} else {}",
                self.expr(&Ty::Int, d),
                self.expr(&Ty::Bool, d),
                self.expr(&Ty::Int, d)
            ),
            9 => format!(
                "max({}, {})",
                self.expr(&Ty::Int, d),
                self.expr(&Ty::Int, d)
            ),
            10 => format!("abs({})", self.expr(&Ty::Int, d)),
            11 => format!("int({})", self.expr(&Ty::Float, d)),
            12 => format!("{} << {}", self.rng.int(0, 9), self.rng.int(0, 5)),
            _ => format!("-({})", self.expr(&Ty::Int, d)),
        }
    }

    fn float_expr(&mut self, depth: u32) -> String {
        if depth == 0 {
            return self.float_lit();
        }
        let d = depth - 1;
        match self.rng.below(6) {
            0 => format!("{} * {}", self.expr(&Ty::Float, d), self.float_lit()),
            1 => format!("{} / {}", self.expr(&Ty::Int, d), self.rng.int(1, 8)),
            2 => format!("float({})", self.expr(&Ty::Int, d)),
            3 => format!("{} + {}", self.expr(&Ty::Float, d), self.expr(&Ty::Int, d)),
            4 => format!(
                "round({}, {})",
                self.expr(&Ty::Float, d),
                self.rng.int(0, 3)
            ),
            _ => self.float_lit(),
        }
    }

    fn str_expr(&mut self, depth: u32) -> String {
        if depth == 0 {
            return self.str_lit();
        }
        let d = depth - 1;
        match self.rng.below(20) {
            16 => {
                let vt = self.scalar_ty();
                format!(
                    "\"{}\".join(sorted({}.keys()))",
                    self.rng.pick(&[",", "-", ""]),
                    self.expr(&Ty::Dict(Box::new(vt)), d)
                )
            }
            17 => {
                let m = *self.rng.pick(&[
                    "lstrip()",
                    "rstrip()",
                    "capitalize()",
                    "removeprefix(\"a\")",
                    "removesuffix(\"i\")",
                    "strip(\"-\")",
                ]);
                format!("{}.{m}", self.expr(&Ty::Str, d))
            }
            18 => {
                let t = self.any_ty(1);
                format!(
                    "\"{{a}}/{{b}}\".format(a={}, b={})",
                    self.expr(&t, d),
                    self.expr(&Ty::Str, d)
                )
            }
            19 => format!(
                "{}.get(\"{}\", \"dflt\")",
                self.expr(&Ty::Dict(Box::new(Ty::Str)), d),
                self.key()
            ),
            0 => format!("{} + {}", self.expr(&Ty::Str, d), self.expr(&Ty::Str, d)),
            1 => format!("'${{{}}}-${{{}}}'", self.interp(), self.interp()),
            2 => format!("{}.upper()", self.expr(&Ty::Str, d)),
            3 => format!("{}.lower()", self.expr(&Ty::Str, d)),
            4 => format!("{}.strip()", self.expr(&Ty::Str, d)),
            5 => format!(
                "{}.replace(\"a\", \"{}\")",
                self.expr(&Ty::Str, d),
                self.rng.pick(&["b", "", "--"])
            ),
            6 => format!(
                "\"{}\".join({})",
                self.rng.pick(&[",", "-", " ", ""]),
                self.expr(&Ty::List(Box::new(Ty::Str)), d)
            ),
            7 => {
                let t = self.any_ty(1);
                format!("str({})", self.expr(&t, d))
            }
            8 => {
                let t = self.any_ty(1);
                format!(
                    "\"{{}}:{{}}\".format({}, {})",
                    self.expr(&t, d),
                    self.expr(&Ty::Int, d)
                )
            }
            9 => format!(
                "{}[{}:{}]",
                self.expr(&Ty::Str, d),
                self.rng.int(0, 2),
                self.rng.int(2, 6)
            ),
            10 => format!("{} * {}", self.expr(&Ty::Str, d), self.rng.int(0, 3)),
            11 => format!(
                "{} if {} else {}",
                self.expr(&Ty::Str, d),
                self.expr(&Ty::Bool, d),
                self.expr(&Ty::Str, d)
            ),
            12 => format!("{}.title()", self.expr(&Ty::Str, d)),
            13 | 14 => format!("'${{{}}}'", self.interp()),
            _ => self.str_lit(),
        }
    }

    /// What goes inside `${...}`: no string literal (quotes cannot nest there); lists,
    /// dicts and instances show how values print inside strings.
    fn interp(&mut self) -> String {
        let mut roots: Vec<String> = self.locals.iter().map(|(n, _)| n.clone()).collect();
        if self.cur_pkg.is_none() {
            roots.extend(self.globals.iter().map(|(n, _)| n.clone()));
        }
        match self.rng.below(6) {
            0 | 1 if !roots.is_empty() => self.rng.pick(&roots).clone(),
            2 => format!("[{}, {}]", self.rng.int(-5, 50), self.float_lit()),
            3 => format!(" {{a = {}, b = [True, None]}} ", self.rng.int(0, 9)),
            4 => self.float_lit(),
            // `${{` is no interpolation of a dict literal upstream: parenthesize one
            _ => {
                let e = self.int_expr(1);
                if e.starts_with('{') {
                    format!("({e})")
                } else {
                    e
                }
            }
        }
    }

    fn bool_expr(&mut self, depth: u32) -> String {
        if depth == 0 {
            return self.rng.pick(&["True", "False"]).to_string();
        }
        let d = depth - 1;
        match self.rng.below(15) {
            12 => {
                let m = *self.rng.pick(&[
                    "endswith(\"i\")",
                    "isdigit()",
                    "isalpha()",
                    "islower()",
                    "isupper()",
                ]);
                format!("{}.{m}", self.expr(&Ty::Str, d))
            }
            13 => {
                let vt = self.scalar_ty();
                format!(
                    "\"{}\" {} {}",
                    self.key(),
                    self.rng.pick(&["in", "not in"]),
                    self.expr(&Ty::Dict(Box::new(vt)), d)
                )
            }
            14 => {
                let vt = self.scalar_ty();
                let dct = self.expr(&Ty::Dict(Box::new(vt)), d);
                format!(
                    "{} k, v in {dct} {{ len(k) > {} }}",
                    self.rng.pick(&["all", "any"]),
                    self.rng.int(2, 5)
                )
            }
            0 => format!("{} < {}", self.expr(&Ty::Int, d), self.expr(&Ty::Int, d)),
            1 => format!("{} == {}", self.expr(&Ty::Str, d), self.expr(&Ty::Str, d)),
            2 => format!(
                "{} in {}",
                self.expr(&Ty::Int, d),
                self.expr(&Ty::List(Box::new(Ty::Int)), d)
            ),
            3 => format!("not {}", self.expr(&Ty::Bool, d)),
            4 => format!(
                "{} and {}",
                self.expr(&Ty::Bool, d),
                self.expr(&Ty::Bool, d)
            ),
            5 => format!("{} or {}", self.expr(&Ty::Bool, d), self.expr(&Ty::Bool, d)),
            6 => {
                let v = self.fresh("x");
                let l = self.expr(&Ty::List(Box::new(Ty::Int)), d);
                self.locals.push((v.clone(), Ty::Int));
                let c = self.expr(&Ty::Bool, d);
                self.locals.pop();
                format!("{} {v} in {l} {{ {c} }}", self.rng.pick(&["all", "any"]))
            }
            7 => format!(
                "{}.startswith(\"{}\")",
                self.expr(&Ty::Str, d),
                self.rng.pick(&["a", "w", ""])
            ),
            8 => format!("{} >= {}", self.expr(&Ty::Float, d), self.expr(&Ty::Int, d)),
            9 => {
                let t = self.any_ty(1);
                format!(
                    "typeof({}) == \"{}\"",
                    self.expr(&t, d),
                    self.rng.pick(&["int", "str", "list", "dict"])
                )
            }
            10 => format!("bool({})", self.expr(&Ty::Int, d)),
            _ => self.rng.pick(&["True", "False"]).to_string(),
        }
    }

    fn list_expr(&mut self, et: &Ty, depth: u32) -> String {
        let d = depth.saturating_sub(1);
        let choice = if depth == 0 { 0 } else { self.rng.below(13) };
        match choice {
            10 => {
                let dct = self.expr(&Ty::Dict(Box::new(et.clone())), d);
                if self.rng.chance(50) {
                    format!("[v for k, v in {dct}]")
                } else {
                    format!("{dct}.values()")
                }
            }
            11 => format!(
                "{}[{}]",
                self.expr(&Ty::List(Box::new(et.clone())), d),
                self.rng.pick(&["1:", "::-1", ":2", "-1:"])
            ),
            12 => {
                let v = self.fresh("m");
                let src = self.expr(&Ty::List(Box::new(et.clone())), d);
                format!("map {v} in {src} {{ {v} }}")
            }
            1 if *et == Ty::Int => {
                let v = self.fresh("i");
                let n = self.rng.int(0, 6);
                self.locals.push((v.clone(), Ty::Int));
                let body = self.expr(&Ty::Int, d);
                let cond = self.expr(&Ty::Bool, d);
                self.locals.pop();
                if self.rng.chance(50) {
                    format!("[{body} for {v} in range({n}) if {cond}]")
                } else {
                    format!("[{body} for {v} in range({n})]")
                }
            }
            2 => {
                let src_t = self.scalar_ty();
                let v = self.fresh("e");
                let src = self.expr(&Ty::List(Box::new(src_t.clone())), d);
                self.locals.push((v.clone(), src_t));
                let body = self.expr(et, d);
                self.locals.pop();
                format!("[{body} for {v} in {src}]")
            }
            3 => format!(
                "{} + {}",
                self.expr(&Ty::List(Box::new(et.clone())), d),
                self.expr(&Ty::List(Box::new(et.clone())), d)
            ),
            4 if matches!(et, Ty::Int | Ty::Str) => {
                format!("sorted({})", self.expr(&Ty::List(Box::new(et.clone())), d))
            }
            5 => {
                let v = self.fresh("f");
                let src = self.expr(&Ty::List(Box::new(et.clone())), d);
                self.locals.push((v.clone(), et.clone()));
                let c = self.expr(&Ty::Bool, d);
                self.locals.pop();
                format!("filter {v} in {src} {{ {c} }}")
            }
            6 => format!(
                "[*{}, {}]",
                self.expr(&Ty::List(Box::new(et.clone())), d),
                self.expr(et, d)
            ),
            7 => format!(
                "[{}, if {}: {}]",
                self.expr(et, d),
                self.expr(&Ty::Bool, d),
                self.expr(et, d)
            ),
            8 if matches!(et, Ty::Str) => {
                let dt = self.scalar_ty();
                let dct = self.expr(&Ty::Dict(Box::new(dt)), d);
                format!("[k for k in {dct}]")
            }
            _ => {
                let n = self.rng.below(4);
                let items: Vec<String> = (0..n).map(|_| self.expr(et, d)).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    fn key(&mut self) -> String {
        self.rng.pick(NAMES).to_string()
    }

    fn dict_expr(&mut self, vt: &Ty, depth: u32) -> String {
        let d = depth.saturating_sub(1);
        let choice = if depth == 0 { 0 } else { self.rng.below(10) };
        match choice {
            8 => {
                let dct = self.expr(&Ty::Dict(Box::new(vt.clone())), d);
                format!("filter k, v in {dct} {{ len(k) > {} }}", self.rng.int(2, 5))
            }
            9 => {
                let dct = self.expr(&Ty::Dict(Box::new(vt.clone())), d);
                format!("{{k: v for k, v in {dct} if k != \"{}\"}}", self.key())
            }
            1 => {
                let v = self.fresh("j");
                let n = self.rng.int(0, 4);
                self.locals.push((v.clone(), Ty::Int));
                let body = self.expr(vt, d);
                self.locals.pop();
                format!("{{\"k${{{v}}}\": {body} for {v} in range({n})}}")
            }
            2 => format!(
                "{} | {}",
                self.expr(&Ty::Dict(Box::new(vt.clone())), d),
                self.expr(&Ty::Dict(Box::new(vt.clone())), d)
            ),
            3 => format!(
                "{{**{}, {} = {}}}",
                self.expr(&Ty::Dict(Box::new(vt.clone())), d),
                self.key(),
                self.expr(vt, d)
            ),
            4 => format!(
                "{{{} = {}, if {}: {} = {}}}",
                self.key(),
                self.expr(vt, d),
                self.expr(&Ty::Bool, d),
                self.key(),
                self.expr(vt, d)
            ),
            _ => {
                let n = self.rng.below(4);
                let mut seen = Vec::new();
                let mut items = Vec::new();
                for _ in 0..n {
                    let k = self.key();
                    let quoted = self.rng.chance(25);
                    let op = if seen.contains(&k) {
                        "="
                    } else {
                        *self.rng.pick(&[":", "=", ":"])
                    };
                    // a repeated `:` key unifies; only scalars and dicts are safe to repeat
                    let op = if seen.contains(&k) && !matches!(vt, Ty::Dict(_)) {
                        "="
                    } else {
                        op
                    };
                    seen.push(k.clone());
                    let k = if quoted { format!("\"{k}\"") } else { k };
                    items.push(format!("{k} {op} {}", self.expr(vt, d)));
                }
                format!("{{{}}}", items.join(", "))
            }
        }
    }

    /// `S {...}` (or `S(arg) {...}`) for schema `i`.
    fn instance(&mut self, i: usize, depth: u32) -> String {
        let multiline = std::mem::take(&mut self.multiline);
        let s = self.schemas[i].clone();
        let mut entries = Vec::new();
        for (fi, f) in s.fields.iter().enumerate() {
            let must = s.required.contains(&fi);
            if !f.config || (!must && !self.rng.chance(40)) {
                continue;
            }
            entries.push(self.config_entry(f, depth));
            // the same key again with `:` (a stack's override of a base's nested instance):
            // what the union keeps depends on the nested instance's config keys
            if let Ty::Schema(j) = &f.ty
                && self.rng.chance(20)
            {
                let set: Vec<Field> = self.schemas[*j]
                    .fields
                    .iter()
                    .filter(|x| x.config && !matches!(x.ty, Ty::Schema(_)))
                    .cloned()
                    .collect();
                if !set.is_empty() {
                    let g = self.rng.pick(&set).clone();
                    let d = depth.saturating_sub(1);
                    entries.push(format!(
                        "{}: {{{} = {}}}",
                        f.name,
                        g.name,
                        self.expr(&g.ty, d)
                    ));
                }
            }
        }
        if let Some(vt) = &s.index {
            for _ in 0..self.rng.below(3) {
                let k = format!("extra{}", self.rng.below(4));
                if entries
                    .iter()
                    .any(|e: &String| e.starts_with(&format!("{k} ")))
                {
                    continue;
                }
                let op = *self.rng.pick(&[":", "="]);
                entries.push(format!("{k} {op} {}", self.expr(vt, depth.min(1))));
            }
        }
        // shuffle a little: entry order is part of the output order
        if entries.len() > 1 && self.rng.chance(50) {
            let a = self.rng.below(entries.len());
            let b = self.rng.below(entries.len());
            entries.swap(a, b);
        }
        let name = s.qualified(self.cur_pkg.as_deref());
        let head = if s.param {
            format!("{name}({})", self.rng.int(0, 9))
        } else {
            name
        };
        if entries.is_empty() {
            format!("{head} {{}}")
        } else if !multiline || self.rng.chance(50) {
            format!("{head} {{{}}}", entries.join(", "))
        } else {
            let ind = "    ";
            format!(
                "{head} {{\n{}\n}}",
                entries
                    .iter()
                    .map(|e| e
                        .lines()
                        .map(|l| format!("{ind}{l}"))
                        .collect::<Vec<_>>()
                        .join("\n"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        }
    }

    fn config_entry(&mut self, f: &Field, depth: u32) -> String {
        let d = depth.saturating_sub(1);
        match &f.ty {
            Ty::List(_) if self.rng.chance(25) => {
                format!("{} += {}", f.name, self.expr(&f.ty, d))
            }
            Ty::Schema(j) if self.rng.chance(40) => {
                // a nested schema through a dict literal or dotted keys
                let sj = self.schemas[*j].clone();
                let set: Vec<Field> = sj
                    .fields
                    .iter()
                    .filter(|x| x.config && !matches!(x.ty, Ty::Schema(_)))
                    .cloned()
                    .collect();
                if set.is_empty() || !sj.required.is_empty() {
                    return format!("{} = {}", f.name, self.expr(&f.ty, d));
                }
                let g = self.rng.pick(&set).clone();
                if self.rng.chance(50) {
                    format!("{}.{} = {}", f.name, g.name, self.expr(&g.ty, d))
                } else {
                    format!("{}: {{{} = {}}}", f.name, g.name, self.expr(&g.ty, d))
                }
            }
            Ty::Dict(vt) if self.rng.chance(30) => {
                format!("{}: {{{} = {}}}", f.name, self.key(), self.expr(vt, d))
            }
            _ => {
                let op = *self.rng.pick(&["=", ":", "="]);
                format!("{} {op} {}", f.name, self.expr(&f.ty, d))
            }
        }
    }

    /// A schema definition (text) registered as schema `i`.
    fn schema_def(&mut self, pkg: Option<String>) -> String {
        let visible: Vec<usize> = self
            .visible_schemas()
            .into_iter()
            .filter(|&i| self.schemas[i].pkg == pkg && !self.schemas[i].param)
            .collect();
        let mut name = self.rng.pick(SCHEMA_NAMES).to_string();
        while self.schemas.iter().any(|s| s.name == name && s.pkg == pkg) {
            name = format!("{name}{}", self.rng.below(10));
        }
        let parent = if !visible.is_empty() && self.rng.chance(30) {
            Some(*self.rng.pick(&visible))
        } else {
            None
        };
        let mut fields: Vec<Field> = parent
            .map(|p| self.schemas[p].fields.clone())
            .unwrap_or_default();
        let mut required: Vec<usize> = parent
            .map(|p| self.schemas[p].required.clone())
            .unwrap_or_default();
        let param = parent.is_none() && self.rng.chance(15);
        let index = if parent.is_none() && self.rng.chance(20) {
            Some(if self.rng.chance(50) {
                Ty::Int
            } else {
                Ty::Str
            })
        } else {
            None
        };
        let key_name = index.is_some() && self.rng.chance(60);
        let mut body = Vec::new();
        if let Some(vt) = &index {
            let vt_s = vt.annot(self);
            body.push(if key_name {
                format!("[key: str]: {vt_s}")
            } else {
                format!("[str]: {vt_s}")
            });
        }
        // a list attribute of the base declared again without a value (a `+=` config entry
        // then appends once per declaration, as upstream's evaluator runs each)
        if index.is_none() && self.rng.chance(20) {
            let lists: Vec<Field> = fields
                .iter()
                .filter(|f| f.config && matches!(f.ty, Ty::List(_)))
                .cloned()
                .collect();
            if !lists.is_empty() {
                let f = self.rng.pick(&lists).clone();
                body.push(format!("{}: {}", f.name, f.ty.annot(self)));
            }
        }
        let nfields = 1 + self.rng.below(4);
        let saved = std::mem::take(&mut self.locals);
        let mut with_default: Vec<(String, Ty)> = Vec::new();
        for _ in 0..nfields {
            let fname = self.key();
            if fields.iter().any(|f| f.name == fname) {
                continue;
            }
            let mut ty = self.any_ty(1);
            if let Ty::Schema(j) = ty
                && (self.schemas[j].pkg != pkg || self.schemas[j].param)
            {
                ty = Ty::Int;
            }
            if index.is_some() {
                // an index signature constrains every attribute's type
                ty = index.clone().unwrap();
            }
            let optional = self.rng.chance(30);
            let has_default = self.rng.chance(60);
            let annot = ty.annot(self);
            let q = if optional { "?" } else { "" };
            let line = if has_default {
                let v = self.expr(&ty, 1);
                format!("{fname}{q}: {annot} = {v}")
            } else {
                format!("{fname}{q}: {annot}")
            };
            body.push(line);
            if has_default && matches!(ty, Ty::Int | Ty::Str | Ty::List(_)) {
                with_default.push((fname.clone(), ty.clone()));
            }
            if !has_default && !optional {
                required.push(fields.len());
            }
            fields.push(Field {
                name: fname.clone(),
                ty: ty.clone(),
                set: has_default || !optional,
                config: true,
            });
            // derived attributes see the ones before
            self.locals.push((fname, ty));
        }
        // an augmented assignment of an attribute, read before and after it (upstream runs
        // it again for a read ahead of it)
        if !with_default.is_empty() && index.is_none() && self.rng.chance(25) {
            let (fname, ty) = self.rng.pick(&with_default).clone();
            let snap = |g: &mut Gen, body: &mut Vec<String>, fields: &mut Vec<Field>| {
                let n = g.fresh("seen");
                body.push(format!("{n} = {fname}"));
                fields.push(Field {
                    name: n,
                    ty: ty.clone(),
                    set: true,
                    config: false,
                });
            };
            if self.rng.chance(60) {
                snap(self, &mut body, &mut fields);
            }
            let v = self.expr(&ty, 1);
            body.push(format!("{fname} += {v}"));
            if self.rng.chance(50) {
                snap(self, &mut body, &mut fields);
            }
        }
        if param {
            self.locals.push(("n".into(), Ty::Int));
            body.push(format!("pn: int = n * {}", self.rng.int(1, 4)));
            fields.push(Field {
                name: "pn".into(),
                ty: Ty::Int,
                set: true,
                config: true,
            });
        }
        if self.rng.chance(40) && index.is_none() {
            let dname = self.fresh("derived");
            let t = self.scalar_ty();
            let v = self.expr(&t, 1);
            body.push(format!("{dname} = {v}"));
            fields.push(Field {
                name: dname,
                ty: t,
                set: true,
                config: false,
            });
        }
        self.locals = saved;
        // checks hold for almost every instance; a few programs fail them on purpose
        let mut checks = Vec::new();
        for f in fields.iter().filter(|f| f.set) {
            if !self.rng.chance(25) {
                continue;
            }
            checks.push(match &f.ty {
                Ty::Int => format!(
                    "{} >= {}, \"{} too small\"",
                    f.name,
                    self.rng.int(-200, -20),
                    f.name
                ),
                Ty::Str => format!("len({}) >= 0", f.name),
                Ty::List(_) => format!("len({}) < 50 if {}", f.name, f.name),
                _ => format!("{} == {}", f.name, f.name),
            });
        }
        let mut text = String::new();
        if self.rng.chance(10) {
            text.push_str("@deprecated(strict=False)\n");
        }
        let params = if param { "[n: int]" } else { "" };
        let parent_s = parent
            .map(|p| format!("({})", self.schemas[p].qualified(pkg.as_deref())))
            .unwrap_or_default();
        text.push_str(&format!("schema {name}{params}{parent_s}:\n"));
        if self.rng.chance(30) {
            text.push_str(&format!("    \"\"\"{name} docs\"\"\"\n"));
        }
        if body.is_empty() {
            body.push("pass_ = 1".into());
        }
        for l in &body {
            text.push_str(&format!("    {l}\n"));
        }
        if !checks.is_empty() {
            text.push_str("\n    check:\n");
            for c in &checks {
                text.push_str(&format!("        {c}\n"));
            }
        }
        self.schemas.push(SchemaInfo {
            name,
            pkg,
            fields,
            index,
            param,
            required,
        });
        text
    }

    fn mixin_schema(&mut self) -> String {
        // a mixin sets a derived attribute of the schema it is mixed into
        let Some(i) = (0..self.schemas.len()).rev().find(|&i| {
            self.schemas[i].pkg.is_none()
                && !self.schemas[i].param
                && self.schemas[i].index.is_none()
        }) else {
            return String::new();
        };
        let sf: Vec<Field> = self.schemas[i]
            .fields
            .iter()
            .filter(|f| f.set && f.ty == Ty::Str)
            .cloned()
            .collect();
        let mname = format!("{}Mixin", self.schemas[i].name);
        let src = match sf.first() {
            Some(f) => format!("\"mixed-${{{}}}\"", f.name),
            None => "\"mixed\"".into(),
        };
        let child = format!("{}X", self.schemas[i].name);
        let text = format!(
            "mixin {mname}:\n    tag: str = {src}\n\nschema {child}({}):\n    mixin [{mname}]\n    tag?: str\n",
            self.schemas[i].name
        );
        let mut info = self.schemas[i].clone();
        info.name = child;
        info.fields.push(Field {
            name: "tag".into(),
            ty: Ty::Str,
            set: true,
            config: true,
        });
        self.schemas.push(info);
        text
    }

    fn lambda_def(&mut self) -> String {
        let name = self.fresh("fn");
        let np = 1 + self.rng.below(2);
        let mut ps = Vec::new();
        let mut tys = Vec::new();
        for k in 0..np {
            let t = self.scalar_ty();
            let pn = format!("p{k}");
            ps.push(format!("{pn}: {}", t.annot(self)));
            self.locals.push((pn, t.clone()));
            tys.push(t);
        }
        let rt = self.scalar_ty();
        let body = self.expr(&rt, 2);
        self.locals.clear();
        let text = format!(
            "{name} = lambda {} -> {} {{\n    {body}\n}}\n",
            ps.join(", "),
            rt.annot(self)
        );
        self.lambdas.push((name, tys, rt));
        text
    }

    /// A package file: a few schemas (named like the main package's, on purpose) and values.
    fn package(&mut self, pkg: &str) -> String {
        self.cur_pkg = Some(pkg.to_string());
        let mut text = String::new();
        for _ in 0..1 + self.rng.below(2) {
            text.push_str(&self.schema_def(Some(pkg.to_string())));
            text.push('\n');
        }
        let t = self.scalar_ty();
        let v = self.expr(&t, 1);
        text.push_str(&format!("default_{pkg} = {v}\n"));
        self.cur_pkg = None;
        text
    }

    /// A whole program with its command line.
    pub fn program(&mut self) -> Program {
        let mut files: Vec<(String, String)> = Vec::new();
        let mut imports = Vec::new();
        let npkgs = if self.rng.chance(35) {
            1 + self.rng.below(2)
        } else {
            0
        };
        for k in 0..npkgs {
            let pkg = format!("pkg{k}");
            let text = self.package(&pkg);
            files.push((format!("{pkg}/{pkg}.k"), text));
            imports.push(pkg);
        }
        let nmain = if self.rng.chance(30) {
            2 + self.rng.below(2)
        } else {
            1
        };
        let mut mains: Vec<String> = vec![String::new(); nmain];
        for m in mains.iter_mut() {
            for p in &imports {
                m.push_str(&format!("import {p}\n"));
            }
            if !imports.is_empty() {
                m.push('\n');
            }
        }
        // definitions land in any main file; a file may use what a later file defines
        for _ in 0..1 + self.rng.below(3) {
            let f = self.rng.below(nmain);
            let def = self.schema_def(None);
            mains[f].push_str(&def);
            mains[f].push('\n');
        }
        if self.rng.chance(20) {
            let f = self.rng.below(nmain);
            let def = self.mixin_schema();
            mains[f].push_str(&def);
            mains[f].push('\n');
        }
        if self.rng.chance(35) {
            let f = self.rng.below(nmain);
            let def = self.lambda_def();
            mains[f].push_str(&def);
        }
        let nstmts = 2 + self.rng.below(6);
        for _ in 0..nstmts {
            let f = self.rng.below(nmain);
            let s = self.statement(nmain, &mut mains, f);
            mains[f].push_str(&s);
        }
        let mut args = Vec::new();
        let sys: String = self
            .imports
            .iter()
            .map(|m| format!("import {m}\n"))
            .collect();
        for m in mains.iter_mut() {
            m.insert_str(0, &sys);
        }
        for (k, m) in mains.into_iter().enumerate() {
            let name = if k == 0 {
                "main.k".to_string()
            } else {
                format!("part{k}.k")
            };
            args.push(name.clone());
            files.push((name, m));
        }
        files.push(("kcl.mod".into(), "[package]\nname = \"prog\"\n".into()));
        if self.rng.chance(15) {
            args.push("-D".into());
            args.push(format!(
                "opt={}",
                self.rng
                    .pick(&["1", "abc", "True", "[1,2]", "{\"a\": 1}", "2.5"])
            ));
        }
        if self.rng.chance(8) {
            args.push(self.rng.pick(&["-k", "-n", "-H"]).to_string());
        }
        // `-O path=value` on a global or an instance's attribute
        if self.rng.chance(10) {
            let mut targets: Vec<(String, Ty)> = Vec::new();
            for (n, t) in &self.globals {
                match t {
                    Ty::Int | Ty::Str | Ty::Bool => targets.push((n.clone(), t.clone())),
                    Ty::Schema(i) => {
                        for f in self.schemas[*i].fields.iter().filter(|f| f.config) {
                            if matches!(f.ty, Ty::Int | Ty::Str) {
                                targets.push((format!("{n}.{}", f.name), f.ty.clone()));
                            }
                        }
                    }
                    _ => {}
                }
            }
            if !targets.is_empty() {
                let (path, t) = self.rng.pick(&targets).clone();
                let v = match t {
                    Ty::Int => self.rng.int(-3, 99).to_string(),
                    Ty::Bool => "False".to_string(),
                    _ => "\"over\"".to_string(),
                };
                args.push("-O".into());
                args.push(if self.rng.chance(15) {
                    format!("{path}-")
                } else {
                    format!("{path}={v}")
                });
            }
        }
        Program { files, args }
    }

    fn statement(&mut self, nmain: usize, mains: &mut [String], f: usize) -> String {
        let main_schemas: Vec<usize> = (0..self.schemas.len()).collect();
        if self.rng.chance(25) {
            return self.feature();
        }
        match self.rng.below(13) {
            0..=2 if !main_schemas.is_empty() => {
                // `name: S {...}` declared in one or several files (upstream merges them)
                let i = *self.rng.pick(&main_schemas);
                let name = self.fresh("inst");
                self.multiline = true;
                let first = self.instance(i, 1);
                let mut text = format!("{name}: {first}\n");
                if self.rng.chance(40)
                    && self.schemas[i].required.is_empty()
                    && !self.schemas[i].param
                {
                    let g = self.rng.below(nmain);
                    self.multiline = true;
                    let more = self.instance(i, 1);
                    let extra = format!("{name}: {more}\n");
                    if g == f {
                        text.push_str(&extra);
                    } else {
                        mains[g].push_str(&extra);
                    }
                }
                self.globals.push((name, Ty::Schema(i)));
                text
            }
            3 => {
                let t = self.any_ty(2);
                let name = self.fresh("v");
                let v = self.expr(&t, 2);
                self.globals.push((name.clone(), t.clone()));
                if self.rng.chance(30) {
                    format!("{name}: {} = {v}\n", t.annot(self))
                } else {
                    format!("{name} = {v}\n")
                }
            }
            4 if !main_schemas.is_empty() => {
                self.instances_used = true;
                let i = *self.rng.pick(&main_schemas);
                let s = self.schemas[i].clone();
                let name = self.fresh("all");
                let q = s.qualified(None);
                match s.fields.iter().find(|x| x.set) {
                    Some(fl) => format!("{name} = [x.{} for x in {q}.instances()]\n", fl.name),
                    None => format!("{name} = len({q}.instances())\n"),
                }
            }
            5 => {
                let name = format!("_{}", self.fresh("p"));
                let t = self.scalar_ty();
                let v = self.expr(&t, 1);
                let pub_name = self.fresh("v");
                let u = self.expr(&t, 0);
                self.globals.push((pub_name.clone(), Ty::List(Box::new(t))));
                format!("{name} = {v}\n{pub_name} = [{name}, {u}]\n")
            }
            6 => {
                let name = self.fresh("opt");
                let ty = *self
                    .rng
                    .pick(&["str", "int", "bool", "list", "dict", "float"]);
                let def = match ty {
                    "str" => "\"dflt\"".to_string(),
                    "int" => "7".to_string(),
                    "bool" => "False".to_string(),
                    "list" => "[]".to_string(),
                    "dict" => "{}".to_string(),
                    _ => "0.5".to_string(),
                };
                if self.rng.chance(50) {
                    format!("{name} = option(\"opt\", type=\"{ty}\", default={def})\n")
                } else {
                    format!("{name} = option(\"opt\")\n")
                }
            }
            7 => {
                // a public name is assigned once; the branches set a private one
                let c = self.expr(&Ty::Bool, 1);
                let name = self.fresh("v");
                let v = self.expr(&Ty::Int, 1);
                let w = self.expr(&Ty::Int, 1);
                self.globals.push((name.clone(), Ty::Int));
                format!("_{name} = {w}\nif {c}:\n    _{name} = {v}\n{name} = _{name}\n")
            }
            8 => {
                let c = self.expr(&Ty::Bool, 1);
                if self.rng.chance(70) {
                    format!("assert True, \"{}\"\n", self.fresh("msg"))
                } else {
                    format!(
                        "assert {c}, \"assertion ${{{}}}\"\n",
                        self.expr(&Ty::Int, 0)
                    )
                }
            }
            9 if !self.globals.is_empty() => {
                // reading a global before the file that defines it
                let (g, t) = self.rng.pick(&self.globals.clone()).clone();
                let name = self.fresh("copy");
                self.globals.push((name.clone(), t));
                format!("{name} = {g}\n")
            }
            10 => {
                let name = self.fresh("d");
                let t = Ty::Dict(Box::new(self.scalar_ty()));
                let a = self.expr(&t, 1);
                let b = self.expr(&t, 1);
                self.globals.push((name.clone(), t));
                format!("{name} = {a}\n{name}2 = {name} | {b}\n")
            }
            11 if self.rng.chance(40) => self.type_probe(),
            // a bare config at the top level: upstream merges it into the output document
            12 if self.rng.chance(15) => {
                let vt = self.scalar_ty();
                format!("{}\n", self.dict_expr(&vt, 1))
            }
            _ => {
                let t = self.any_ty(1);
                let name = self.fresh("v");
                let v = self.expr(&t, 2);
                self.globals.push((name.clone(), t));
                format!("{name} = {v}\n")
            }
        }
    }

    /// The static type rules: builtins given values of any type, ordering comparisons of
    /// unions (an `if` expression of two types), and a private name reassigned with a value of
    /// another type. Most of these fail; the failure must be upstream's.
    fn type_probe(&mut self) -> String {
        let (t1, t2) = (self.any_ty(1), self.any_ty(1));
        let (a, b) = (self.expr(&t1, 1), self.expr(&t2, 1));
        let name = self.fresh("t");
        match self.rng.below(5) {
            0 => {
                let f = *self.rng.pick(&[
                    "len", "hex", "ord", "sorted", "sum", "abs", "round", "isunique", "all_true",
                    "typeof", "str", "int", "bool", "float", "bin",
                ]);
                format!("{name} = {f}({a})\n")
            }
            1 => {
                let f = *self
                    .rng
                    .pick(&["pow", "range", "multiplyof", "round", "sorted"]);
                if f == "sorted" {
                    format!("{name} = sorted({a}, reverse={b})\n")
                } else {
                    format!("{name} = {f}({a}, {b})\n")
                }
            }
            2 => {
                let c = self.expr(&Ty::Bool, 0);
                let op = *self.rng.pick(&["<", ">=", "==", "!=", "in", "not in"]);
                let d = self.expr(&t2, 0);
                format!("{name} = ({a} if {c} else {b}) {op} {d}\n")
            }
            3 => format!("_{name} = {a}\n_{name} = {b}\n{name} = _{name}\n"),
            _ => {
                let c = self.expr(&Ty::Bool, 0);
                format!("_{name} = {a}\nif {c}:\n    _{name} = {b}\n{name} = [_{name}]\n")
            }
        }
    }
}

/// Patterns for `regex` calls (valid, so the program reaches what the call returns).
const PATTERNS: &[&str] = &[
    r"[a-z]+",
    r"\d+",
    r"^a",
    r"x*",
    r"(\w)-(\w)",
    r"[,;]",
    r"\s+",
    r"b|c",
    r"^$",
    r".",
];

/// The system modules [`Gen::builtin_call`] imports.
const MODULES: &[&str] = &[
    "base64",
    "crypto",
    "json",
    "yaml",
    "math",
    "net",
    "regex",
    "units",
    "datetime",
    "template",
    "collection",
    "manifests",
];

/// Functions for [`Gen::builtin_call`] and the kinds of their positional arguments (see
/// [`Gen::call_arg`]); a leading `.` names a string method.
const CALLS: &[(&str, &[&str])] = &[
    ("base64.encode", &["s"]),
    ("base64.decode", &["s"]),
    ("crypto.md5", &["s"]),
    ("crypto.sha256", &["s"]),
    ("crypto.blake3", &["s"]),
    ("json.encode", &["ldsif"]),
    ("json.decode", &["s"]),
    ("json.validate", &["s"]),
    ("json.merge", &["ldsi", "ldsi"]),
    ("yaml.encode", &["ldsif"]),
    ("yaml.encode_all", &["l"]),
    ("yaml.decode", &["s"]),
    ("yaml.decode_all", &["s"]),
    ("yaml.validate", &["s"]),
    ("math.ceil", &["if"]),
    ("math.floor", &["if"]),
    ("math.factorial", &["i"]),
    ("math.gcd", &["i", "i"]),
    ("math.modf", &["if"]),
    ("math.log", &["if", "if"]),
    ("math.pow", &["if", "if"]),
    ("math.sqrt", &["if"]),
    ("net.split_host_port", &["s"]),
    ("net.join_host_port", &["s", "is"]),
    ("net.parse_IP", &["s"]),
    ("net.to_IP4", &["s"]),
    ("net.to_IP6", &["s"]),
    ("net.is_IPv4", &["s"]),
    ("net.is_global_unicast_IP", &["s"]),
    ("net.parse_CIDR", &["s"]),
    ("net.is_IP_in_CIDR", &["s", "s"]),
    ("net.CIDR_host", &["s", "i"]),
    ("net.CIDR_netmask", &["s"]),
    ("net.CIDR_subnet", &["s", "i", "i"]),
    ("net.CIDR_subnets", &["s", "l"]),
    ("regex.match", &["s", "s"]),
    ("regex.replace", &["s", "s", "s"]),
    ("regex.findall", &["s", "s"]),
    ("regex.split", &["s", "s"]),
    ("units.to_Ki", &["if"]),
    ("units.to_M", &["if"]),
    ("units.to_n", &["if"]),
    ("datetime.validate", &["s", "s"]),
    ("datetime.is_rfc3339", &["s"]),
    ("template.execute", &["s", "d"]),
    ("template.html_escape", &["s"]),
    ("collection.union_all", &["l"]),
    ("manifests.yaml_stream", &["ld"]),
    ("multiplyof", &["i", "i"]),
    ("isunique", &["l"]),
    ("len", &["lsd"]),
    ("abs", &["if"]),
    ("all_true", &["l"]),
    ("hex", &["i"]),
    ("oct", &["i"]),
    ("ord", &["s"]),
    ("sorted", &["lds"]),
    ("range", &["r", "r", "r"]),
    ("max", &["lif", "if"]),
    ("min", &["lif", "if"]),
    ("sum", &["l", "il"]),
    ("pow", &["if", "if", "i"]),
    ("round", &["f", "i"]),
    ("zip", &["l", "l"]),
    ("int", &["sfi", "i"]),
    ("float", &["sfi"]),
    ("str", &["ifsld"]),
    ("list", &["lsd"]),
    ("dict", &["d"]),
    ("bool", &["ifsld"]),
    ("typeof", &["ifsld"]),
    (".count", &["s"]),
    (".endswith", &["s"]),
    (".find", &["s", "i", "i"]),
    (".index", &["s"]),
    (".join", &["l"]),
    (".lstrip", &["s"]),
    (".replace", &["s", "s", "i"]),
    (".removeprefix", &["s"]),
    (".rsplit", &["s", "i"]),
    (".split", &["s", "i"]),
    (".splitlines", &["b"]),
    (".startswith", &["s", "i"]),
    (".title", &[]),
    (".isdigit", &[]),
    (".format", &["s", "i"]),
];

/// Keyword arguments [`Gen::builtin_call`] may add, by function.
const CALL_KEYWORDS: &[(&str, &[(&str, &str)])] = &[
    (
        "json.encode",
        &[
            ("sort_keys", "b"),
            ("indent", "i"),
            ("ignore_private", "b"),
            ("ignore_none", "b"),
        ],
    ),
    (
        "yaml.encode",
        &[
            ("sort_keys", "b"),
            ("ignore_private", "b"),
            ("ignore_none", "b"),
        ],
    ),
    ("sorted", &[("reverse", "b")]),
    ("typeof", &[("full_name", "b")]),
    ("int", &[("base", "i")]),
];

const CALL_INTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "3",
    "7",
    "10",
    "255",
    "1024",
    "-7",
    "2147483648",
    "9223372036854775807",
];
const CALL_FLOATS: &[&str] = &["0.0", "1.5", "-2.5", "3.0", "1e3", "0.1", "2.675", "1e-7"];
const CALL_STRS: &[&str] = &[
    "\"\"",
    "\"abc\"",
    "\"a,b,c\"",
    "\"Hello World\"",
    "\"  pad  \"",
    "\"10Mi\"",
    "\"192.168.1.10\"",
    "\"10.0.0.0/8\"",
    "\"10.1.0.0/16\"",
    "\"::1\"",
    "\"2001:db8::/32\"",
    "\"host:80\"",
    "\"[::1]:443\"",
    "\"2024-01-15\"",
    "\"2024-01-15T10:00:00Z\"",
    "\"ünï\"",
    "\"a\\nb\"",
    "\"123\"",
    "\"-4\"",
    "\"1.5\"",
    "\"{\\\"a\\\": 1}\"",
    "\"a: 1\\nb: [1, 2]\"",
    "\"- 1\\n- 2\"",
    "\"%Y-%m-%d\"",
    "\"aGVsbG8=\"",
    "\"[a-z]+\"",
    "\"True\"",
    "\"null\"",
    "\"0x1F\"",
    "\"{{.a}}\"",
    "\"<b>&\"",
    "\"{}-{}\"",
    "\"fe80::1\"",
    "\"1.2.3.4/24\"",
];
const CALL_LISTS: &[&str] = &[
    "[]",
    "[1, 2, 3]",
    "[3, 1, 2]",
    "[\"b\", \"a\"]",
    "[1, \"a\"]",
    "[[1], [2]]",
    "[1.5, 2]",
    "[None, 1]",
    "[True, False]",
    "[{a = 1}, {b = 2}]",
    "[8, 8, 16]",
    "[2, 1]",
];
const CALL_DICTS: &[&str] = &[
    "{}",
    "{a = 1}",
    "{a = 1, b = \"x\"}",
    "{\"b\": 2, \"a\": 1}",
    "{a = None, _p = 1}",
    "{a = {b = [1, 2]}}",
    "{a = [{b = None}]}",
];

/// Addresses for `net` calls.
const ADDRS: &[&str] = &[
    "127.0.0.1",
    "10.0.0.1",
    "::1",
    "fe80::1",
    "224.0.0.1",
    "0.0.0.0",
    "8.8.8.8",
    "ff02::1",
    "192.168.1.300",
    "abc",
    "",
    "2001:db8::68",
    "255.255.255.255",
];

/// Language areas the typed generator above does not reach: system modules, format specs,
/// rules and protocols, closures, literal and union types, unpacking, number formatting and
/// run-time errors. Each statement is small and names what it binds freshly; a few fail on
/// purpose (the failure must be upstream's).
impl Gen {
    fn import(&mut self, m: &'static str) {
        if !self.imports.contains(&m) {
            self.imports.push(m);
        }
    }

    fn word(&mut self) -> String {
        self.str_lit()
    }

    fn num_lit(&mut self) -> String {
        match self.rng.below(5) {
            0 => self.rng.int(-1000, 100000).to_string(),
            1 => self.float_lit(),
            2 => self
                .rng
                .pick(&[
                    "1e20",
                    "1e-7",
                    "0.1 + 0.2",
                    "1.0 / 3",
                    "2.0 ** 70",
                    "-0.0",
                    "1e16",
                    "1e15",
                    "123456789.123456789",
                    "100000000000000000.0",
                    "0.000123",
                    "3.0",
                ])
                .to_string(),
            3 => self.rng.int(-5, 5).to_string(),
            _ => format!("{}.{}", self.rng.int(0, 999), self.rng.int(0, 9999)),
        }
    }

    /// A random format spec for `"{:spec}".format(n)`.
    fn format_spec(&mut self) -> String {
        let mut s = String::new();
        if self.rng.chance(20) {
            s.push(*self.rng.pick(&['*', '0', 'x', ' ']));
            s.push(*self.rng.pick(&['<', '>', '^', '=']));
        } else if self.rng.chance(30) {
            s.push(*self.rng.pick(&['<', '>', '^', '=']));
        }
        if self.rng.chance(25) {
            s.push(*self.rng.pick(&['+', '-', ' ']));
        }
        if self.rng.chance(15) {
            s.push('#');
        }
        if self.rng.chance(15) {
            s.push('0');
        }
        if self.rng.chance(50) {
            s.push_str(&self.rng.int(1, 12).to_string());
        }
        if self.rng.chance(15) {
            s.push(*self.rng.pick(&[',', '_']));
        }
        if self.rng.chance(35) {
            s.push_str(&format!(".{}", self.rng.int(0, 5)));
        }
        if self.rng.chance(60) {
            s.push(*self.rng.pick(&[
                'd', 'f', 'e', 'g', 'x', 'X', 'b', 'o', '%', 'F', 'E', 'G', 'n', 's',
            ]));
        }
        s
    }

    /// An argument for a call: mostly of one of the kinds `kinds` names (`i` int, `r` small
    /// int, `f` float, `s` str, `l` list, `d` dict, `b` bool), now and then of any kind.
    fn call_arg(&mut self, kinds: &str) -> String {
        let kinds: Vec<char> = kinds.chars().collect();
        let k = if kinds.is_empty() || self.rng.chance(12) {
            *self.rng.pick(&['i', 'f', 's', 'l', 'd', 'b', 'm'])
        } else {
            *self.rng.pick(&kinds)
        };
        let pool: &[&str] = match k {
            'i' => CALL_INTS,
            'f' => CALL_FLOATS,
            's' => CALL_STRS,
            'l' => CALL_LISTS,
            'd' => CALL_DICTS,
            'b' => &["True", "False"],
            'r' => &["0", "1", "-1", "3", "10", "-3"],
            _ => &["None", "Undefined", "lambda x {x}", "1Ki", "[1, \"a\"]"],
        };
        self.rng.pick(pool).to_string()
    }

    /// A call of a builtin, a system-module function or a string method with arguments drawn
    /// by [`Gen::call_arg`]: the argument counts, types and values at the edges of what each
    /// accepts (upstream's static checks, its run-time errors and its results).
    fn builtin_call(&mut self) -> String {
        let (f, kinds) = *self.rng.pick(CALLS);
        let mut n = kinds.len();
        if self.rng.chance(30) {
            n = self.rng.int(0, kinds.len() as i64 + 1) as usize;
        }
        let mut args: Vec<String> = (0..n)
            .map(|i| {
                let k = kinds.get(i).copied().unwrap_or("ifsld");
                self.call_arg(k)
            })
            .collect();
        if let Some(m) = f.strip_prefix('.') {
            let recv = self.call_arg("s");
            return format!("{recv}.{m}({})", args.join(", "));
        }
        if let Some((m, _)) = f.split_once('.') {
            let m = *MODULES
                .iter()
                .find(|x| **x == m)
                .expect("a module of MODULES");
            self.import(m);
        }
        for (kw, kinds) in CALL_KEYWORDS
            .iter()
            .filter(|(g, _)| *g == f)
            .flat_map(|(_, k)| k.iter())
        {
            if self.rng.chance(30) {
                let v = self.call_arg(kinds);
                args.push(format!("{kw}={v}"));
            }
        }
        format!("{f}({})", args.join(", "))
    }

    fn feature(&mut self) -> String {
        let name = self.fresh("f");
        match self.rng.below(31) {
            30 => {
                let call = self.builtin_call();
                format!("{name} = {call}\n")
            }
            0 => {
                self.import("math");
                let f = *self.rng.pick(&[
                    "ceil", "floor", "sqrt", "exp", "log", "log2", "log10", "log1p", "expm1",
                    "isnan", "isinf", "isfinite", "modf",
                ]);
                let x = self
                    .rng
                    .pick(&["0", "1", "2.5", "16", "-3.7", "100", "0.5", "1e10"]);
                if self.rng.chance(25) {
                    let g = *self.rng.pick(&["gcd", "pow", "log"]);
                    format!(
                        "{name} = math.{g}({}, {})\n",
                        self.rng.int(1, 40),
                        self.rng.int(1, 12)
                    )
                } else if self.rng.chance(15) {
                    format!("{name} = math.factorial({})\n", self.rng.int(0, 12))
                } else {
                    format!("{name} = math.{f}({x})\n")
                }
            }
            1 => {
                self.import("regex");
                let p = *self.rng.pick(PATTERNS);
                let w = self.word();
                let call = match self.rng.below(7) {
                    0 => format!("regex.match({w}, r\"{p}\")"),
                    1 => format!("regex.replace({w}, r\"{p}\", \"_\")"),
                    2 => format!("regex.findall({w}, r\"{p}\")"),
                    3 => format!("regex.search({w}, r\"{p}\")"),
                    4 => format!("regex.split({w}, r\"{p}\")"),
                    5 => format!("regex.compile(r\"{p}\")"),
                    _ => format!(
                        "regex.replace({w}, r\"{p}\", \"-\", {})",
                        self.rng.int(0, 2)
                    ),
                };
                format!("{name} = {call}\n")
            }
            2 => {
                self.import("base64");
                self.import("crypto");
                let w = self.word();
                let f = *self.rng.pick(&[
                    "base64.encode",
                    "crypto.md5",
                    "crypto.sha1",
                    "crypto.sha256",
                    "crypto.sha512",
                    "crypto.sha224",
                    "crypto.sha384",
                ]);
                if self.rng.chance(30) {
                    format!("{name} = base64.decode(base64.encode({w}))\n")
                } else {
                    format!("{name} = {f}({w})\n")
                }
            }
            3 => {
                self.import("json");
                let t = self.any_ty(2);
                let v = self.expr(&t, 2);
                let opts = [
                    "",
                    ", sort_keys=True",
                    ", indent=2",
                    ", indent=4, sort_keys=True",
                    ", ignore_private=True",
                    ", ignore_none=True",
                ];
                let o = *self.rng.pick(&opts);
                if self.rng.chance(25) {
                    format!("{name} = json.decode(json.encode({v}{o}))\n")
                } else {
                    format!("{name} = json.encode({v}{o})\n")
                }
            }
            4 => {
                self.import("yaml");
                let t = self.any_ty(2);
                let v = self.expr(&t, 2);
                match self.rng.below(4) {
                    0 => format!("{name} = yaml.decode(yaml.encode({v}))\n"),
                    1 => format!("{name} = yaml.encode_all([{v}, {v}])\n"),
                    2 => format!("{name} = yaml.encode({v}, sort_keys=True)\n"),
                    _ => format!("{name} = yaml.encode({v})\n"),
                }
            }
            5 => {
                self.import("units");
                let f = *self.rng.pick(&[
                    "to_n", "to_u", "to_m", "to_K", "to_M", "to_G", "to_T", "to_P", "to_Ki",
                    "to_Mi", "to_Gi", "to_Ti", "to_Pi",
                ]);
                let n = *self
                    .rng
                    .pick(&["1024", "1048576", "1500", "0.5", "3", "2000000", "0"]);
                let lit = *self
                    .rng
                    .pick(&["1Ki", "2Mi", "3G", "500m", "1k", "4Gi", "7u", "10n"]);
                match self.rng.below(4) {
                    0 => format!("{name} = units.{f}({n})\n"),
                    1 => format!("{name} = [{lit}, \"${{{lit}}}\", str({lit}), int({lit})]\n"),
                    2 => format!("{name}: units.NumberMultiplier = {lit}\n"),
                    _ => format!("{name} = float({lit})\n"),
                }
            }
            6 => {
                self.import("net");
                let a = *self.rng.pick(ADDRS);
                let f = *self.rng.pick(&[
                    "is_IPv4",
                    "is_IP",
                    "is_loopback_IP",
                    "is_multicast_IP",
                    "is_unspecified_IP",
                    "is_global_unicast_IP",
                    "is_link_local_unicast_IP",
                    "is_link_local_multicast_IP",
                    "is_interface_local_multicast_IP",
                ]);
                match self.rng.below(4) {
                    0 => format!(
                        "{name} = net.split_host_port(\"{a}:{}\")\n",
                        self.rng.int(1, 9000)
                    ),
                    1 => format!(
                        "{name} = net.join_host_port(\"{a}\", {})\n",
                        self.rng.int(1, 9000)
                    ),
                    _ => format!("{name} = net.{f}(\"{a}\")\n"),
                }
            }
            7 | 8 => {
                let spec = self.format_spec();
                let n = self.num_lit();
                if self.rng.chance(30) {
                    let w = self.word();
                    format!("{name} = \"{{0:{spec}}}|{{1}}|{{0}}\".format({n}, {w})\n")
                } else {
                    format!("{name} = \"[{{:{spec}}}]\".format({n})\n")
                }
            }
            9 => {
                // a rule over a protocol, checked on instantiation
                let r = self.fresh("Rule");
                let p = format!("{r}Protocol");
                let lo = self.rng.int(-5, 5);
                let v = self.rng.int(-5, 9);
                format!(
                    "protocol {p}:\n    x: int\n\nrule {r} for {p}:\n    x > {lo}, \"x must exceed {lo}\"\n\n{name} = {r} {{x = {v}}}\n"
                )
            }
            10 => {
                // closures: a lambda returning a lambda, defaults and keyword arguments
                let a = self.rng.int(-5, 9);
                let b = self.rng.int(-5, 9);
                match self.rng.below(3) {
                    0 => format!(
                        "{name}_add = lambda x: int {{\n    lambda y: int {{\n        x + y\n    }}\n}}\n{name} = {name}_add({a})({b})\n"
                    ),
                    1 => format!(
                        "{name}_f = lambda x: int, y: int = {b} {{\n    x * y\n}}\n{name} = [{name}_f({a}), {name}_f({a}, {b}), {name}_f(x = {a})]\n"
                    ),
                    _ => format!(
                        "_{name}_base = {a}\n{name}_g = lambda x {{\n    _{name}_base + x\n}}\n{name} = [{name}_g(i) for i in range({})]\n",
                        self.rng.int(0, 4)
                    ),
                }
            }
            11 => {
                // literal and union types
                match self.rng.below(4) {
                    0 => {
                        let w = *self.rng.pick(&["a", "b", "c"]);
                        format!("{name}: \"a\" | \"b\" = \"{w}\"\n")
                    }
                    1 => format!("{name}: 1 | 2 | 3 = {}\n", self.rng.int(1, 4)),
                    2 => format!(
                        "{name}: [int | str] = [1, \"a\", {}]\n",
                        self.rng.pick(&["2", "\"b\"", "True", "None"])
                    ),
                    _ => format!(
                        "{name}: {{str: int | float}} = {{a = 1, b = {}}}\n",
                        self.num_lit()
                    ),
                }
            }
            12 => {
                // unpacking and unions of instances and dicts
                let vis = self.visible_schemas();
                match vis.first() {
                    Some(&i) if self.schemas[i].required.is_empty() && !self.schemas[i].param => {
                        let q = self.schemas[i].qualified(None);
                        let f: Vec<Field> = self.schemas[i]
                            .fields
                            .iter()
                            .filter(|f| f.config && !matches!(f.ty, Ty::Schema(_)))
                            .cloned()
                            .collect();
                        match f.first() {
                            Some(f) => {
                                let v = self.expr(&f.ty, 1);
                                if self.rng.chance(50) {
                                    format!("{name} = {q} {{}} | {{{} = {v}}}\n", f.name)
                                } else {
                                    format!("{name} = {q} {{**{{{} = {v}}}}}\n", f.name)
                                }
                            }
                            None => format!("{name} = {q} {{}}\n"),
                        }
                    }
                    _ => format!(
                        "{name} = {{**{{a = 1}}, **{{b = 2}}, c = 3}} | {{a = {}}}\n",
                        self.rng.int(0, 9)
                    ),
                }
            }
            13 => {
                // numbers as the output prints them
                let xs: Vec<String> = (0..3).map(|_| self.num_lit()).collect();
                format!("{name} = [{}]\n", xs.join(", "))
            }
            14 => {
                // conversions
                let w = self.word();
                let n = self.num_lit();
                let (i, r) = (self.rng.int(-300, 300), self.rng.int(0, 3));
                let cs = [
                    format!("int({w})"),
                    format!("float({w})"),
                    format!("str({n})"),
                    format!("int({n})"),
                    format!("bool({w})"),
                    format!("list({w})"),
                    format!("hex({i})"),
                    format!("oct({i})"),
                    format!("bin({i})"),
                    format!("round({n}, {r})"),
                    format!("abs({n})"),
                    format!("typeof({n})"),
                ];
                let c = self.rng.pick(&cs).clone();
                format!("{name} = {c}\n")
            }
            15 => {
                // run-time errors (their message and position are compared)
                let e = *self.rng.pick(&[
                    "[1, 2][5]",
                    "{\"a\": 1}[\"b\"]",
                    "\"abc\".index(\"z\")",
                    "[1, 2, 3][1:\"a\"]",
                    "{\"a\": 1}.a.b",
                    "None.x",
                    "1 + \"a\"",
                    "[] + {}",
                    "\"%\" * -1",
                    "max([])",
                    "sum([\"a\"])",
                    "pow(2, -1)",
                    "2 ** -1",
                    "[1][-2]",
                    "\"ab\"[3]",
                    "range(0, 10, 0)",
                    "ord(\"ab\")",
                    "1 << 70",
                    "9223372036854775807 + 1",
                    "-9223372036854775807 - 2",
                    "int(\"12\", 1)",
                ]);
                if self.rng.chance(50) {
                    format!("_{name} = {e}\n")
                } else {
                    format!("{name} = {e}\n")
                }
            }
            16 => {
                // a schema with checks that may fail, and its instance
                let s = self.fresh("Checked");
                let lo = self.rng.int(0, 5);
                let v = self.rng.int(-2, 9);
                let w = self.word();
                self.import("regex");
                format!(
                    "schema {s}:\n    n: int\n    s: str\n\n    check:\n        n >= {lo}, \"n must be at least {lo}, got ${{n}}\"\n        regex.match(s, r\"^[a-z]*$\") if n > 3, \"bad s\"\n        multiplyof(n, 1)\n\n{name} = {s} {{n = {v}, s = {w}}}\n"
                )
            }
            17 => {
                // string methods with arguments
                let w = self.word();
                let m = *self.rng.pick(&[
                    "split(\",\")",
                    "split()",
                    "rsplit(\",\", 1)",
                    "splitlines()",
                    "count(\"a\")",
                    "isalnum()",
                    "isspace()",
                    "istitle()",
                    "rindex(\"a\")",
                    "index(\" \")",
                    "find(\"e\", 1)",
                    "startswith(\"a\", 1)",
                    "replace(\"a\", \"b\", 1)",
                ]);
                format!("{name} = {w}.{m}\n")
            }
            18 => {
                // builtins on collections
                let c = *self.rng.pick(&[
                    "zip([1, 2], [\"a\", \"b\"])",
                    "sorted([3, 1, 2], reverse=True)",
                    "isunique([1, 2, 1])",
                    "all_true([1, True])",
                    "any_true([0, False])",
                    "multiplyof(10, 5)",
                    "pow(2, 3, 5)",
                    "round(2.5)",
                    "round(3.5)",
                    "round(2.675, 2)",
                    "range(10, 0, -3)",
                    "sum([1.5, 2])",
                    "max([1, 2], [3])",
                    "min(\"abc\")",
                    "sum([[1], [2]], [])",
                    "list({\"a\": 1, \"b\": 2})",
                    "sorted({\"b\": 1, \"a\": 2})",
                    "[1, 2] * 2",
                    "[[1, 2], [3]][1:]",
                    "{\"a\": 1} | {\"a\": 2, \"b\": 3}",
                    "len(\"ünï\")",
                    "\"ünï\"[1]",
                    "typeof([1], full_name=True)",
                ]);
                format!("{name} = {c}\n")
            }
            19 => {
                // comprehensions: two variables, nesting, dict comprehensions typed
                let n = self.rng.int(0, 4);
                match self.rng.below(4) {
                    0 => format!("{name}: {{str:int}} = {{k: v for k, v in {{a = 1, b = {n}}}}}\n"),
                    1 => format!(
                        "{name} = [i * j for i in range({n}) for j in range(i) if j % 2 == 0]\n"
                    ),
                    2 => {
                        format!("{name} = {{str(i): [j for j in range(i)] for i in range({n})}}\n")
                    }
                    _ => format!("{name} = [k + str(v) for k, v in {{a = 1, b = {n}}}]\n"),
                }
            }
            20 => {
                // operators: bitwise, chained comparisons, membership, string ops
                let a = self.rng.int(-9, 99);
                let b = self.rng.int(0, 9);
                let es = [
                    format!("{a} & {b}"),
                    format!("{a} | {b}"),
                    format!("{a} ^ {b}"),
                    format!("~{a}"),
                    format!("{a} >> {b}"),
                    format!("{b} < {a} < 100"),
                    format!("{a} // -{}", b + 1),
                    format!("{a} % -{}", b + 1),
                    format!("{a}.5 // {}", b + 1),
                    "\"a\" in \"abc\"".to_string(),
                    "[1, 2] < [1, 3]".to_string(),
                    format!("{a} ** {b}"),
                    format!("{a} / {}", b + 1),
                ];
                let e = self.rng.pick(&es).clone();
                format!("{name} = {e}\n")
            }
            21 => {
                // a schema with a mixin for a protocol, and inheritance with a check
                let s = self.fresh("Base");
                let v = self.rng.int(0, 9);
                format!(
                    "protocol {s}Protocol:\n    n: int\n\nmixin {s}Mixin for {s}Protocol:\n    doubled: int = n * 2\n\nschema {s}:\n    mixin [{s}Mixin]\n    n: int = {v}\n\nschema {s}Child({s}):\n    extra: str = \"x${{n}}\"\n\n    check:\n        n < 8, \"n too big\"\n\n{name} = {s}Child {{}}\n"
                )
            }
            24 => {
                // string escapes and interpolation escapes, as upstream's lexer decodes them
                let x = self.rng.int(0, 9);
                let lit = *self.rng.pick(&[
                    r#""\$""#,
                    r#""a\$b""#,
                    r#""\${x}""#,
                    r#""\\${x}""#,
                    r#""\\\${x}""#,
                    r#""${x}\${x}""#,
                    r#""\x41\u00e9\U0001F600""#,
                    r#""\101\0""#,
                    r#""\q\d""#,
                    r#""\ud800""#,
                    r#"'''\${x} ${x}'''"#,
                    r#"r"\${x}\n""#,
                    r#""tab\tnl\n""#,
                    r#""\x4""#,
                    r#""\u12""#,
                    r#""${x""#,
                    r#""\${x""#,
                    r#""$$x $""#,
                ]);
                format!(
                    "{name}_x = {x}\n{name} = {}\n",
                    lit.replace("{x}", &format!("{{{name}_x}}"))
                )
            }
            25 => {
                // a lambda's locals: reached in order, `op=` on a package variable immutable
                let v = self.rng.int(0, 9);
                let g = self.fresh("g");
                let body = match self.rng.below(6) {
                    0 => format!("    d = {v}\n    d += 1\n    d"),
                    1 => "    d += 1\n    d".to_string(),
                    2 => format!("    y = d\n    d = {v}\n    y"),
                    3 => format!("    {g} += 1\n    {g}"),
                    4 => format!(
                        "    if {v} > 4:\n        d = 1\n    else:\n        d = 2\n    d * {v}"
                    ),
                    _ => format!("    d = {{a = {v}}}\n    d.b = 1\n    d"),
                };
                let call = if self.rng.chance(70) { "()" } else { "" };
                format!("{g} = {v}\n{name} = lambda {{\n{body}\n}}{call}\n")
            }
            26 => {
                // comprehension filters (a conditional expression is one filter)
                let n = self.rng.int(0, 6);
                let f = *self.rng.pick(&[
                    "if x % 2 == 0",
                    "if x > 1 if x < 4 else False",
                    "if x if True else False",
                    "if x > 1 if x < 4",
                    "if not x",
                    "if x in [1, 2]",
                ]);
                if self.rng.chance(50) {
                    format!("{name} = [x * 2 for x in range({n}) {f}]\n")
                } else {
                    format!("{name} = {{str(x): x for x in range({n}) {f}}}\n")
                }
            }
            27 => {
                // schema parameters and index keys of list attributes in configs
                let s = self.fresh("Param");
                let v = self.rng.int(0, 9);
                let params =
                    *self
                        .rng
                        .pick(&["[n]", "[n: int]", "[n = 1]", "[n, m = 2]", "[n: int = 3]"]);
                let inst = *self.rng.pick(&[
                    "{}",
                    "(1) {}",
                    "(1, 2) {}",
                    "(n = 2) {}",
                    "() {}",
                    "{xs[0] = 9}",
                    "{xs[0] = [9]}",
                    "(1) {xs[-1] += [7]}",
                    "(1) {ys[0] = 1}",
                ]);
                format!(
                    "schema {s}{params}:\n    xs: [int] = [{v}, n]\n    total: int = sum(xs)\n\n{name} = {s}{inst}\n"
                )
            }
            28 => {
                // builtins at the edges of their types
                let e = *self.rng.pick(&[
                    "typeof(Undefined)",
                    "typeof(None)",
                    "typeof(lambda {1})",
                    "str(Undefined) if False else 1",
                    "[Undefined, None, 1]",
                    "{a = Undefined, b = None}",
                    "len({a = Undefined})",
                    "int(\"0x10\", 16) if False else int(\"10\", 16)",
                    "float(\"1e3\")",
                    "bool(\"\")",
                    "\"ab\".index(\"b\", 0, 2)",
                    "sorted([\"b\", \"A\", \"a\"])",
                    "[1, 2, 3][-1:0:-1]",
                    "\"abc\"[::-2]",
                ]);
                format!("{name} = {e}\n")
            }
            29 => {
                // manifests and codecs of values of every shape
                self.import("manifests");
                let t = self.any_ty(1);
                let v = self.expr(&t, 1);
                let opts = *self.rng.pick(&[
                    "",
                    ", opts={sort_keys = True}",
                    ", opts={ignore_none = True}",
                    // (no `sep`: upstream 0.12.4 panics re-reading a stream with another separator)
                    ", opts={ignore_private = True}",
                ]);
                if self.rng.chance(20) {
                    format!("manifests.yaml_stream({v}{opts})\n")
                } else {
                    format!("manifests.yaml_stream([{v}, {v}]{opts})\n")
                }
            }
            22 => {
                // if expressions and optional chaining
                let c = self.expr(&Ty::Bool, 1);
                match self.rng.below(3) {
                    0 => format!("{name} = {{a = 1}} if {c} else None\n{name}b = {name}?.a\n"),
                    1 => format!("{name} = [1, 2] if {c} else []\n{name}b = {name}?[0]\n"),
                    _ => format!("{name} = None\n{name}b = {name}?.x?.y\n"),
                }
            }
            _ => {
                // string interpolation with specs and of every kind of value
                let t = self.any_ty(1);
                let v = self.expr(&t, 1);
                match self.rng.below(3) {
                    0 => {
                        self.import("json");
                        format!("_{name} = {v}\n{name} = \"${{_{name}: #json}}\"\n")
                    }
                    1 => {
                        self.import("yaml");
                        format!("_{name} = {v}\n{name} = \"${{_{name}: #yaml}}\"\n")
                    }
                    _ => format!("_{name} = {v}\n{name} = \"<${{_{name}}}>\"\n"),
                }
            }
        }
    }
}
