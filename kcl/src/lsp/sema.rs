//! The semantic model behind hover, completion, navigation, rename, semantic tokens and inlay
//! hints: package tables (schemas, rules, type aliases, variables, imports), schema members with
//! their types, defaults and docs, and a walk of a file that resolves every name to its
//! definition, with the expected schema of every config literal and the scopes at a position.
//!
//! The checker (`types`) reports errors and keeps no table an editor could ask; this model is
//! its reader's counterpart and, like it, one-sided: what it cannot type is `any`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::ast::{
    self, ConfigEntry, ConfigEntryKind, Expr, ExprKind, FileId, Module, Name, SchemaStmt, Span,
    Stmt, StmtKind, Symbol,
};
use crate::parser::loader::{ImportTarget, MAIN_PKG, Program};

use super::db::{FileData, UnitResult, lock};
use super::signatures;

/// A schema, by package index and name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SchemaRef {
    pub pkg: u32,
    pub name: Symbol,
}

/// A type as the editor shows it.
#[derive(Clone, Debug, PartialEq)]
pub enum LTy {
    Any,
    None,
    Bool,
    Int,
    Float,
    Str,
    List(Box<LTy>),
    Dict(Box<LTy>, Box<LTy>),
    Schema(SchemaRef),
    /// A schema used as a value (its name): calling or instantiating it gives an instance.
    SchemaType(SchemaRef),
    Union(Vec<LTy>),
    /// A lambda: parameter texts and return type.
    Func(Arc<(Vec<String>, LTy)>),
    /// An imported package (index).
    Pkg(u32),
    /// An imported system module.
    SysModule(&'static str),
    /// A literal type as written (`"a"`, `1`, `True`).
    Lit(Arc<str>),
}

impl LTy {
    fn union(ts: Vec<LTy>) -> LTy {
        let mut out: Vec<LTy> = Vec::new();
        for t in ts {
            match t {
                LTy::Union(inner) => {
                    for i in inner {
                        if !out.contains(&i) {
                            out.push(i);
                        }
                    }
                }
                t if !out.contains(&t) => out.push(t),
                _ => {}
            }
        }
        if out.contains(&LTy::Any) {
            return LTy::Any;
        }
        match out.len() {
            0 => LTy::Any,
            1 => out.pop().unwrap_or(LTy::Any),
            _ => LTy::Union(out),
        }
    }
    /// The schemas this type may be (a schema, or the schemas of a union).
    pub fn schemas(&self) -> Vec<SchemaRef> {
        match self {
            LTy::Schema(s) => vec![*s],
            LTy::Union(ts) => ts.iter().flat_map(|t| t.schemas()).collect(),
            _ => Vec::new(),
        }
    }
    /// The element type of a list (or `any`).
    fn elem(&self) -> LTy {
        match self {
            LTy::List(e) => (**e).clone(),
            LTy::Union(ts) => LTy::union(ts.iter().map(|t| t.elem()).collect()),
            LTy::Str => LTy::Str,
            LTy::Dict(k, _) => (**k).clone(),
            _ => LTy::Any,
        }
    }
    /// The value type of a dict (or `any`).
    fn value(&self) -> LTy {
        match self {
            LTy::Dict(_, v) => (**v).clone(),
            LTy::Union(ts) => LTy::union(ts.iter().map(|t| t.value()).collect()),
            _ => LTy::Any,
        }
    }
    /// Literal types widened to their base type (what an unannotated variable gets).
    fn widen(self) -> LTy {
        match self {
            LTy::Lit(s) => {
                if s.starts_with('"') || s.starts_with('\'') {
                    LTy::Str
                } else if &*s == "True" || &*s == "False" {
                    LTy::Bool
                } else if s.contains('.') {
                    LTy::Float
                } else {
                    LTy::Int
                }
            }
            LTy::Union(ts) => LTy::union(ts.into_iter().map(LTy::widen).collect()),
            LTy::List(e) => LTy::List(Box::new(e.widen())),
            t => t,
        }
    }
}

/// What a name refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Def {
    /// A package-level schema, rule, type alias or variable (its first definition).
    Top { pkg: u32, name: Symbol },
    /// A schema attribute, declared at `decl` (in the schema or a base).
    Attr {
        schema: SchemaRef,
        attr: Symbol,
        decl: Span,
    },
    /// A parameter, loop variable, lambda local or schema-body name.
    Local { decl: Span, name: Symbol },
    /// An import's local name (declared at `decl`).
    Import { decl: Span, name: Symbol },
    /// A package (an import path).
    Pkg(u32),
    /// A system module (an import path).
    SysModule(&'static str),
    /// A builtin function.
    Builtin(&'static str),
    /// A system module's function.
    SysFunc(&'static str, &'static str),
    /// A string method.
    StrMethod(&'static str),
}

/// How a name occurs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Where the name is defined.
    Decl,
    Read,
    /// Assigned (not the first time).
    Write,
    /// A config key naming a schema attribute.
    Key,
    /// In a type annotation, schema name, parent or decorator.
    Type,
    /// A part of an import path.
    ImportPath,
}

/// One resolved name.
#[derive(Clone, Debug)]
pub struct Occ {
    pub span: Span,
    pub def: Def,
    pub role: Role,
    /// The name's type where known.
    pub ty: LTy,
}

/// A package-level definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopKind {
    Schema,
    Rule,
    Alias,
    Var,
}

/// Where a package-level name is defined.
#[derive(Clone, Copy, Debug)]
pub struct Top {
    pub kind: TopKind,
    pub name: Name,
    /// Module index and top-level statement index.
    pub m: u32,
    pub s: u32,
}

/// One package of the unit.
pub struct Pkg {
    pub path: Arc<str>,
    pub dir: PathBuf,
    pub modules: Vec<Arc<Module>>,
    pub top: FxHashMap<Symbol, Vec<Top>>,
    /// Names in definition order.
    pub order: Vec<Symbol>,
}

/// A schema attribute as completion and hover show it.
#[derive(Clone, Debug)]
pub struct Member {
    pub name: Symbol,
    pub owner: SchemaRef,
    pub decl: Span,
    pub optional: bool,
    pub ty: LTy,
    /// The annotation as written.
    pub ty_text: String,
    /// The default's source text.
    pub default: Option<String>,
    /// Declared with a type (`name: T`), not just assigned in the body.
    pub declared: bool,
}

impl Member {
    /// Required: declared without `?` and without a default.
    pub fn required(&self) -> bool {
        self.declared && !self.optional && self.default.is_none()
    }
}

/// The semantic model of one unit.
pub struct Sema {
    /// Unique per model (caches keyed by it are invalid for another).
    pub id: u64,
    pub program: Program,
    pub files: Vec<Arc<FileData>>,
    pub pkgs: Vec<Pkg>,
    pub by_path: FxHashMap<Arc<str>, u32>,
    pub file_pkg: FxHashMap<FileId, u32>,
    /// `import` bindings per file: target, the name's declaration span, the statement.
    pub imports: FxHashMap<(FileId, Symbol), (ImportTarget, Span)>,
    pub externals: Vec<(String, PathBuf)>,
    members: Mutex<FxHashMap<SchemaRef, Arc<Vec<Member>>>>,
    var_tys: Mutex<FxHashMap<(u32, Symbol), LTy>>,
}

impl Sema {
    /// Builds the package tables of a unit's program.
    pub fn build(r: Arc<UnitResult>) -> Sema {
        let program = r.program.clone();
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let mut s = Sema {
            id: NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            files: r.files.clone(),
            pkgs: Vec::new(),
            by_path: FxHashMap::default(),
            file_pkg: FxHashMap::default(),
            imports: FxHashMap::default(),
            externals: r.externals.clone(),
            members: Mutex::new(FxHashMap::default()),
            var_tys: Mutex::new(FxHashMap::default()),
            program: Program {
                root: PathBuf::new(),
                main: crate::parser::loader::Package {
                    pkgpath: Arc::from(MAIN_PKG),
                    path: PathBuf::new(),
                    modules: Vec::new(),
                },
                packages: Default::default(),
                imports: Default::default(),
            },
        };
        let all = std::iter::once(&program.main).chain(program.packages.iter().map(|(_, p)| p));
        for p in all {
            let idx = s.pkgs.len() as u32;
            let mut pkg = Pkg {
                path: p.pkgpath.clone(),
                dir: p.path.clone(),
                modules: p.modules.clone(),
                top: FxHashMap::default(),
                order: Vec::new(),
            };
            // the main package's folder is its first file's (its `path` is the package root)
            if idx == 0
                && let Some(m) = p.modules.first()
                && let Some(f) = r.file_of(m.file)
                && let Some(d) = f.path.parent()
            {
                pkg.dir = d.to_path_buf();
            }
            for (mi, m) in p.modules.iter().enumerate() {
                s.file_pkg.insert(m.file, idx);
                for (si, st) in m.body.iter().enumerate() {
                    let mut add = |kind, name: Name| {
                        let e = pkg.top.entry(name.sym).or_default();
                        if e.is_empty() {
                            pkg.order.push(name.sym);
                        }
                        e.push(Top {
                            kind,
                            name,
                            m: mi as u32,
                            s: si as u32,
                        });
                    };
                    match &st.kind {
                        StmtKind::Schema(sc) => add(TopKind::Schema, sc.name),
                        StmtKind::Rule(ru) => add(TopKind::Rule, ru.name),
                        StmtKind::TypeAlias(t) => add(TopKind::Alias, t.name),
                        StmtKind::Import(i) => {
                            if let (Some(t), Some(n)) = (program.import_target(i), i.local_name()) {
                                let decl = i
                                    .asname
                                    .map(|a| a.span)
                                    .or_else(|| i.names.last().map(|n| n.span))
                                    .unwrap_or(st.span);
                                s.imports.insert((m.file, n), (t.clone(), decl));
                            }
                        }
                        _ => {
                            let mut names = Vec::new();
                            assigned_names(st, &mut names);
                            for n in names {
                                add(TopKind::Var, n);
                            }
                        }
                    }
                }
            }
            s.by_path.insert(p.pkgpath.clone(), idx);
            s.pkgs.push(pkg);
        }
        s.program = program;
        s
    }

    /// The package index of a file.
    pub fn pkg_of(&self, file: FileId) -> u32 {
        self.file_pkg.get(&file).copied().unwrap_or(0)
    }

    /// The file data of a file id.
    pub fn file(&self, id: FileId) -> Option<&Arc<FileData>> {
        self.files.iter().find(|f| f.id() == id)
    }

    /// The file data of a path.
    pub fn file_by_path(&self, path: &Path) -> Option<&Arc<FileData>> {
        self.files.iter().find(|f| f.path == path)
    }

    /// The statement of a top-level definition.
    pub fn top_stmt(&self, pkg: u32, t: &Top) -> Option<&Stmt> {
        self.pkgs
            .get(pkg as usize)?
            .modules
            .get(t.m as usize)?
            .body
            .get(t.s as usize)
    }

    /// The first definition of a package-level name.
    pub fn top(&self, pkg: u32, name: Symbol) -> Option<&Top> {
        self.pkgs.get(pkg as usize)?.top.get(&name)?.first()
    }

    /// A schema's definition.
    pub fn schema(&self, r: SchemaRef) -> Option<&SchemaStmt> {
        let t = self.pkgs.get(r.pkg as usize)?.top.get(&r.name)?;
        t.iter().find_map(|t| match &self.top_stmt(r.pkg, t)?.kind {
            StmtKind::Schema(s) if t.kind == TopKind::Schema => Some(&**s),
            _ => None,
        })
    }

    /// The file a schema is defined in.
    pub fn schema_file(&self, r: SchemaRef) -> Option<FileId> {
        let t = self.top(r.pkg, r.name)?;
        Some(self.pkgs[r.pkg as usize].modules[t.m as usize].file)
    }

    /// What an import name binds in `file` (the main package's imports are shared by its
    /// files, as upstream's resolver has them).
    pub fn import(&self, file: FileId, name: Symbol) -> Option<&(ImportTarget, Span)> {
        if let Some(t) = self.imports.get(&(file, name)) {
            return Some(t);
        }
        if self.pkg_of(file) == 0 {
            return self
                .imports
                .iter()
                .find(|((f, n), _)| *n == name && self.pkg_of(*f) == 0)
                .map(|(_, t)| t);
        }
        None
    }

    /// The package an import target names.
    pub fn target_pkg(&self, t: &ImportTarget) -> Option<u32> {
        match t {
            ImportTarget::Package(p) => self.by_path.get(p).copied(),
            _ => None,
        }
    }

    /// The type of an import binding.
    fn import_ty(&self, t: &ImportTarget) -> LTy {
        match t {
            ImportTarget::Package(_) => self.target_pkg(t).map_or(LTy::Any, LTy::Pkg),
            ImportTarget::System(m) => crate::parser::loader::SYSTEM_MODULES
                .iter()
                .find(|s| **s == &**m)
                .map_or(LTy::Any, |s| LTy::SysModule(s)),
            ImportTarget::Plugin(_) => LTy::Any,
        }
    }

    /// A schema named by `names` (`S` or `pkg.S`) from `file` of package `pkg`.
    pub fn resolve_schema(&self, pkg: u32, file: FileId, names: &[Name]) -> Option<SchemaRef> {
        let (p, n) = match names {
            [n] => (pkg, n.sym),
            [p, n] => {
                let (t, _) = self.import(file, p.sym)?;
                (self.target_pkg(t)?, n.sym)
            }
            _ => return None,
        };
        let r = SchemaRef { pkg: p, name: n };
        self.schema(r).map(|_| r)
    }

    /// An annotation as a type.
    pub fn resolve_type(&self, pkg: u32, file: FileId, t: &ast::Type) -> LTy {
        self.resolve_type_depth(pkg, file, t, 0)
    }

    fn resolve_type_depth(&self, pkg: u32, file: FileId, t: &ast::Type, depth: u32) -> LTy {
        use ast::{BasicType, LiteralType, TypeKind};
        if depth > 16 {
            return LTy::Any;
        }
        match &t.kind {
            TypeKind::Any => LTy::Any,
            TypeKind::Basic(b) => match b {
                BasicType::Bool => LTy::Bool,
                BasicType::Int => LTy::Int,
                BasicType::Float => LTy::Float,
                BasicType::Str => LTy::Str,
            },
            TypeKind::Named(id) => {
                if let Some(s) = self.resolve_schema(pkg, file, &id.names) {
                    return LTy::Schema(s);
                }
                // a type alias
                let target = match id.names.as_slice() {
                    [n] => Some((pkg, n.sym)),
                    [p, n] => self
                        .import(file, p.sym)
                        .and_then(|(t, _)| self.target_pkg(t))
                        .map(|tp| (tp, n.sym)),
                    _ => None,
                };
                if let Some((tp, n)) = target
                    && let Some(top) = self.top(tp, n)
                    && top.kind == TopKind::Alias
                    && let Some(st) = self.top_stmt(tp, top)
                    && let StmtKind::TypeAlias(a) = &st.kind
                {
                    let f = self.pkgs[tp as usize].modules[top.m as usize].file;
                    return self.resolve_type_depth(tp, f, &a.ty, depth + 1);
                }
                LTy::Any
            }
            TypeKind::List(e) => LTy::List(Box::new(match e {
                Some(e) => self.resolve_type_depth(pkg, file, e, depth + 1),
                None => LTy::Any,
            })),
            TypeKind::Dict(k, v) => LTy::Dict(
                Box::new(k.as_ref().map_or(LTy::Any, |k| {
                    self.resolve_type_depth(pkg, file, k, depth + 1)
                })),
                Box::new(v.as_ref().map_or(LTy::Any, |v| {
                    self.resolve_type_depth(pkg, file, v, depth + 1)
                })),
            ),
            TypeKind::Union(ts) => LTy::union(
                ts.iter()
                    .map(|x| self.resolve_type_depth(pkg, file, x, depth + 1))
                    .collect(),
            ),
            TypeKind::Literal(l) => LTy::Lit(Arc::from(match l {
                LiteralType::Bool(b) => if *b { "True" } else { "False" }.to_string(),
                LiteralType::Int(i, s) => format!("{i}{}", s.map_or("", |s| s.as_str())),
                LiteralType::Float(f) => format!("{f:?}"),
                LiteralType::Str(s) => format!("{s:?}"),
                LiteralType::None => "None".into(),
                LiteralType::Undefined => "Undefined".into(),
            })),
            TypeKind::Function { params, ret } => LTy::Func(Arc::new((
                params
                    .iter()
                    .map(|p| self.ty_str(&self.resolve_type_depth(pkg, file, p, depth + 1)))
                    .collect(),
                ret.as_ref().map_or(LTy::Any, |r| {
                    self.resolve_type_depth(pkg, file, r, depth + 1)
                }),
            ))),
        }
    }

    /// A type as text (`[str]`, `{str:int}`, `frontend.Server` for another package's schema).
    pub fn ty_str(&self, t: &LTy) -> String {
        match t {
            LTy::Any => "any".into(),
            LTy::None => "None".into(),
            LTy::Bool => "bool".into(),
            LTy::Int => "int".into(),
            LTy::Float => "float".into(),
            LTy::Str => "str".into(),
            LTy::List(e) => format!("[{}]", self.ty_str(e)),
            LTy::Dict(k, v) => format!("{{{}:{}}}", self.ty_str(k), self.ty_str(v)),
            LTy::Schema(s) => self.schema_name(*s),
            LTy::SchemaType(s) => format!("type[{}]", self.schema_name(*s)),
            LTy::Union(ts) => ts
                .iter()
                .map(|t| self.ty_str(t))
                .collect::<Vec<_>>()
                .join(" | "),
            LTy::Func(f) => format!("({}) -> {}", f.0.join(", "), self.ty_str(&f.1)),
            LTy::Pkg(p) => format!("module {}", self.pkgs[*p as usize].path),
            LTy::SysModule(m) => format!("module {m}"),
            LTy::Lit(l) => l.to_string(),
        }
    }

    /// A schema's name, qualified with the last part of its package outside the main one.
    pub fn schema_name(&self, s: SchemaRef) -> String {
        if s.pkg == 0 {
            return s.name.to_string();
        }
        let p = &self.pkgs[s.pkg as usize].path;
        let last = p.rsplit('.').next().unwrap_or(p);
        format!("{last}.{}", s.name)
    }

    /// A schema's attributes, inherited ones first (parent, mixins), own declarations last.
    pub fn members(&self, r: SchemaRef) -> Arc<Vec<Member>> {
        if let Some(m) = lock(&self.members).get(&r) {
            return m.clone();
        }
        // a placeholder first, so an inheritance cycle ends
        lock(&self.members).insert(r, Arc::new(Vec::new()));
        let m = Arc::new(self.build_members(r));
        lock(&self.members).insert(r, m.clone());
        m
    }

    fn build_members(&self, r: SchemaRef) -> Vec<Member> {
        let (Some(st), Some(file)) = (self.schema(r), self.schema_file(r)) else {
            return Vec::new();
        };
        let mut out: Vec<Member> = Vec::new();
        let put = |m: Member, out: &mut Vec<Member>| match out.iter_mut().find(|x| x.name == m.name)
        {
            Some(x) => *x = m,
            None => out.push(m),
        };
        for b in st.parent.iter().chain(st.mixins.iter()) {
            if let Some(pr) = self.resolve_schema(r.pkg, file, &b.names) {
                for m in self.members(pr).iter() {
                    put(m.clone(), &mut out);
                }
            }
        }
        let text = self.file(file).map(|f| f.src.text.clone());
        let snippet = |sp: Span| {
            text.as_ref()
                .and_then(|t| t.get(sp.lo as usize..sp.hi as usize))
                .map(str::to_string)
        };
        fn body_members<'a>(body: &'a [Stmt], out: &mut Vec<&'a Stmt>) {
            for s in body {
                match &s.kind {
                    StmtKind::If(i) => {
                        body_members(&i.body, out);
                        body_members(&i.orelse, out);
                    }
                    _ => out.push(s),
                }
            }
        }
        let mut stmts = Vec::new();
        body_members(&st.body, &mut stmts);
        for s in stmts {
            match &s.kind {
                StmtKind::SchemaAttr(a) => put(
                    Member {
                        name: a.name.sym,
                        owner: r,
                        decl: a.name.span,
                        optional: a.optional,
                        ty: self.resolve_type(r.pkg, file, &a.ty),
                        ty_text: snippet(a.ty.span).unwrap_or_default(),
                        default: a.value.as_ref().and_then(|v| snippet(v.span)),
                        declared: true,
                    },
                    &mut out,
                ),
                StmtKind::Assign(a) => {
                    for t in a.targets.iter().filter(|t| t.path.is_empty()) {
                        if out.iter().any(|m| m.name == t.name.sym) {
                            continue;
                        }
                        let ty = match &a.ty {
                            Some(ty) => self.resolve_type(r.pkg, file, ty),
                            None => self.infer_simple(&a.value),
                        };
                        put(
                            Member {
                                name: t.name.sym,
                                owner: r,
                                decl: t.name.span,
                                optional: true,
                                ty,
                                ty_text: String::new(),
                                default: snippet(a.value.span),
                                declared: false,
                            },
                            &mut out,
                        );
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// A type from the shape of an expression alone (literals), for schema-body assignments.
    fn infer_simple(&self, e: &Expr) -> LTy {
        match &e.kind {
            ExprKind::Int(_) | ExprKind::NumberUnit { .. } => LTy::Int,
            ExprKind::Float(_) => LTy::Float,
            ExprKind::Str(_) | ExprKind::JoinedStr(_) => LTy::Str,
            ExprKind::Bool(_) => LTy::Bool,
            ExprKind::List(_) | ExprKind::ListComp(_) => LTy::List(Box::new(LTy::Any)),
            ExprKind::Config(_) | ExprKind::DictComp(_) => {
                LTy::Dict(Box::new(LTy::Str), Box::new(LTy::Any))
            }
            _ => LTy::Any,
        }
    }

    /// A member of a schema (own or inherited).
    pub fn member(&self, r: SchemaRef, name: Symbol) -> Option<Member> {
        self.members(r).iter().find(|m| m.name == name).cloned()
    }

    /// The type of a package-level name.
    pub fn top_ty(&self, pkg: u32, name: Symbol) -> LTy {
        let Some(top) = self.top(pkg, name).copied() else {
            return LTy::Any;
        };
        match top.kind {
            TopKind::Schema => LTy::SchemaType(SchemaRef { pkg, name }),
            TopKind::Rule | TopKind::Alias => LTy::Any,
            TopKind::Var => {
                if let Some(t) = lock(&self.var_tys).get(&(pkg, name)) {
                    return t.clone();
                }
                lock(&self.var_tys).insert((pkg, name), LTy::Any);
                let t = self.var_ty(pkg, &top);
                lock(&self.var_tys).insert((pkg, name), t.clone());
                t
            }
        }
    }

    fn var_ty(&self, pkg: u32, top: &Top) -> LTy {
        let Some(st) = self.top_stmt(pkg, top) else {
            return LTy::Any;
        };
        let file = self.pkgs[pkg as usize].modules[top.m as usize].file;
        let Some((ty, value)) = find_assignment(st, top.name.span) else {
            return LTy::Any;
        };
        if let Some(t) = ty {
            return self.resolve_type(pkg, file, t);
        }
        let Some(value) = value else {
            return LTy::Any;
        };
        let mut w = Walker::new(self, pkg, file, None);
        w.quiet = true;
        w.expr(value, &LTy::Any).widen()
    }

    /// The type of a member of a value of type `t` (`x.name`), with what it refers to.
    pub fn member_of(&self, t: &LTy, name: Symbol) -> Option<(LTy, Def)> {
        match t {
            LTy::Schema(s) => {
                let m = self.member(*s, name)?;
                Some((
                    m.ty.clone(),
                    Def::Attr {
                        schema: m.owner,
                        attr: name,
                        decl: m.decl,
                    },
                ))
            }
            LTy::Union(ts) => ts.iter().find_map(|t| self.member_of(t, name)),
            LTy::Pkg(p) => {
                self.top(*p, name)?;
                Some((self.top_ty(*p, name), Def::Top { pkg: *p, name }))
            }
            LTy::SysModule(m) => {
                let f = signatures::system_function(m, name.as_str())?;
                Some((
                    LTy::Func(Arc::new((
                        f.params.iter().map(|p| p.to_string()).collect(),
                        ret_ty(f.ret),
                    ))),
                    Def::SysFunc(m, f.name),
                ))
            }
            LTy::Str => {
                let f = signatures::str_method(name.as_str())?;
                Some((
                    LTy::Func(Arc::new((
                        f.params.iter().map(|p| p.to_string()).collect(),
                        ret_ty(f.ret),
                    ))),
                    Def::StrMethod(f.name),
                ))
            }
            _ => None,
        }
    }

    /// Where a definition is declared (none for builtins).
    pub fn def_span(&self, d: &Def) -> Option<Span> {
        match d {
            Def::Top { pkg, name } => self.top(*pkg, *name).map(|t| t.name.span),
            Def::Attr { decl, .. } | Def::Local { decl, .. } | Def::Import { decl, .. } => {
                Some(*decl)
            }
            _ => None,
        }
    }

    /// The name a definition binds.
    pub fn def_name(&self, d: &Def) -> String {
        match d {
            Def::Top { name, .. } => name.to_string(),
            Def::Attr { attr, .. } => attr.to_string(),
            Def::Local { name, .. } | Def::Import { name, .. } => name.to_string(),
            Def::Pkg(p) => self.pkgs[*p as usize].path.to_string(),
            Def::SysModule(m) => m.to_string(),
            Def::Builtin(n) | Def::SysFunc(_, n) | Def::StrMethod(n) => n.to_string(),
        }
    }

    /// Resolves every name of a file (see [`Walker`]).
    pub fn walk_file(&self, file: FileId, target: Option<u32>) -> Walked {
        let pkg = self.pkg_of(file);
        let mut w = Walker::new(self, pkg, file, target);
        if let Some(m) = self.pkgs[pkg as usize]
            .modules
            .iter()
            .find(|m| m.file == file)
            .cloned()
        {
            w.stmts(&m.body, Ctx::Module);
        }
        Walked {
            occs: w.occs,
            configs: w.configs,
            scope: w.snapshot,
            hints: w.hints,
        }
    }

    /// The type a lambda's parameter list and return type give.
    fn lambda_ty(&self, pkg: u32, file: FileId, l: &ast::LambdaExpr, ret: LTy) -> LTy {
        let params = l
            .params
            .iter()
            .map(|p| match &p.ty {
                Some(t) => format!(
                    "{}: {}",
                    p.name.sym,
                    self.ty_str(&self.resolve_type(pkg, file, t))
                ),
                None => p.name.sym.to_string(),
            })
            .collect();
        LTy::Func(Arc::new((params, ret)))
    }
}

/// A builtin's return type from its signature text.
fn ret_ty(s: &str) -> LTy {
    match s {
        "str" => LTy::Str,
        "int" => LTy::Int,
        "float" => LTy::Float,
        "bool" => LTy::Bool,
        "None" => LTy::None,
        "[str]" => LTy::List(Box::new(LTy::Str)),
        "[int]" => LTy::List(Box::new(LTy::Int)),
        "[]" | "[any]" => LTy::List(Box::new(LTy::Any)),
        "{:}" => LTy::Dict(Box::new(LTy::Str), Box::new(LTy::Any)),
        _ => LTy::Any,
    }
}

/// Names a top-level statement assigns (`a = ...`, `a: S {}`, `a += ...`, in `if` bodies too).
pub fn assigned_names(s: &Stmt, out: &mut Vec<Name>) {
    match &s.kind {
        StmtKind::Assign(a) => out.extend(a.targets.iter().map(|t| t.name)),
        StmtKind::AugAssign(a) => out.push(a.target.name),
        StmtKind::Unification(u) => out.push(u.target),
        StmtKind::If(i) => {
            for s in i.body.iter().chain(&i.orelse) {
                assigned_names(s, out);
            }
        }
        _ => {}
    }
}

/// The annotation and value of the assignment of `name` (by its span) in a statement.
fn find_assignment(s: &Stmt, name: Span) -> Option<(Option<&ast::Type>, Option<&Expr>)> {
    match &s.kind {
        StmtKind::Assign(a) if a.targets.iter().any(|t| t.name.span == name) => {
            let direct = a
                .targets
                .iter()
                .find(|t| t.name.span == name)
                .is_some_and(|t| t.path.is_empty());
            Some((a.ty.as_ref(), direct.then_some(&a.value)))
        }
        StmtKind::Unification(u) if u.target.span == name => Some((None, Some(&u.value))),
        StmtKind::AugAssign(a) if a.target.name.span == name => Some((None, None)),
        StmtKind::If(i) => i
            .body
            .iter()
            .chain(&i.orelse)
            .find_map(|s| find_assignment(s, name)),
        _ => None,
    }
}

/// What a walk found.
pub struct Walked {
    /// Every resolved name, in source order.
    pub occs: Vec<Occ>,
    /// Config literals with their expected type (the schema whose attributes they set).
    pub configs: Vec<(Span, LTy)>,
    /// The names in scope at the target position, innermost first.
    pub scope: Option<ScopeSnapshot>,
    /// Unannotated assignments: the name and its inferred type.
    pub hints: Vec<(Span, LTy)>,
}

impl Walked {
    /// The innermost name at `pos`.
    pub fn occ_at(&self, pos: u32) -> Option<&Occ> {
        self.occs
            .iter()
            .filter(|o| o.span.lo <= pos && pos <= o.span.hi)
            .min_by_key(|o| o.span.hi - o.span.lo)
    }
    /// The innermost config literal around `pos` and its type.
    pub fn config_at(&self, pos: u32) -> Option<&(Span, LTy)> {
        self.configs
            .iter()
            .filter(|(s, _)| s.lo < pos && pos < s.hi)
            .min_by_key(|(s, _)| s.hi - s.lo)
    }
}

/// The scopes at a position (innermost first) and the enclosing schema, if any.
#[derive(Clone, Debug, Default)]
pub struct ScopeSnapshot {
    pub locals: Vec<(Symbol, Def, LTy)>,
    pub schema: Option<SchemaRef>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Module,
    Schema(SchemaRef),
    Lambda,
}

#[derive(Clone, Default)]
struct Scope {
    names: Vec<(Symbol, Def, LTy)>,
    schema: Option<SchemaRef>,
}

/// Resolves the names of one file.
pub struct Walker<'s> {
    sema: &'s Sema,
    pkg: u32,
    file: FileId,
    scopes: Vec<Scope>,
    occs: Vec<Occ>,
    configs: Vec<(Span, LTy)>,
    target: Option<u32>,
    snapshot: Option<ScopeSnapshot>,
    hints: Vec<(Span, LTy)>,
    /// Only typing (a variable's value): record nothing.
    quiet: bool,
    depth: u32,
}

impl<'s> Walker<'s> {
    fn new(sema: &'s Sema, pkg: u32, file: FileId, target: Option<u32>) -> Self {
        Walker {
            sema,
            pkg,
            file,
            scopes: Vec::new(),
            occs: Vec::new(),
            configs: Vec::new(),
            target,
            snapshot: None,
            hints: Vec::new(),
            quiet: false,
            depth: 0,
        }
    }

    fn occ(&mut self, span: Span, def: Def, role: Role, ty: LTy) {
        if !self.quiet && span.file == self.file {
            self.occs.push(Occ {
                span,
                def,
                role,
                ty,
            });
        }
    }

    /// Remembers the scopes when `span` holds the target position.
    fn mark(&mut self, span: Span) {
        if let Some(t) = self.target
            && !self.quiet
            && span.lo <= t
            && t <= span.hi
        {
            let mut snap = ScopeSnapshot::default();
            for s in self.scopes.iter().rev() {
                snap.locals.extend(s.names.iter().rev().cloned());
                if snap.schema.is_none() {
                    snap.schema = s.schema;
                }
            }
            self.snapshot = Some(snap);
        }
    }

    fn declare(&mut self, name: Name, ty: LTy) -> Def {
        let def = Def::Local {
            decl: name.span,
            name: name.sym,
        };
        self.occ(name.span, def.clone(), Role::Decl, ty.clone());
        if let Some(s) = self.scopes.last_mut() {
            s.names.push((name.sym, def.clone(), ty));
        }
        def
    }

    /// Looks a name up: local scopes, the package, the file's imports, builtins.
    fn lookup(&self, sym: Symbol) -> Option<(Def, LTy)> {
        for s in self.scopes.iter().rev() {
            if let Some((_, d, t)) = s.names.iter().rev().find(|(n, _, _)| *n == sym) {
                return Some((d.clone(), t.clone()));
            }
            if let Some(sr) = s.schema
                && let Some(m) = self.sema.member(sr, sym)
            {
                return Some((
                    Def::Attr {
                        schema: m.owner,
                        attr: sym,
                        decl: m.decl,
                    },
                    m.ty,
                ));
            }
        }
        if self.sema.top(self.pkg, sym).is_some() {
            return Some((
                Def::Top {
                    pkg: self.pkg,
                    name: sym,
                },
                self.sema.top_ty(self.pkg, sym),
            ));
        }
        if let Some((t, decl)) = self.sema.import(self.file, sym) {
            return Some((
                Def::Import {
                    decl: *decl,
                    name: sym,
                },
                self.sema.import_ty(t),
            ));
        }
        let f = signatures::builtin(sym.as_str())?;
        Some((
            Def::Builtin(f.name),
            LTy::Func(Arc::new((
                f.params.iter().map(|p| p.to_string()).collect(),
                ret_ty(f.ret),
            ))),
        ))
    }

    fn stmts(&mut self, body: &[Stmt], ctx: Ctx) {
        for s in body {
            self.stmt(s, ctx);
        }
    }

    fn stmt(&mut self, s: &Stmt, ctx: Ctx) {
        self.mark(s.span);
        match &s.kind {
            StmtKind::Expr(e) => {
                self.expr(e, &LTy::Any);
            }
            StmtKind::Import(i) => {
                if let Some((t, _)) = self.sema.program.import_target(i).map(|t| (t.clone(), ())) {
                    let def = match &t {
                        ImportTarget::Package(_) => self.sema.target_pkg(&t).map(Def::Pkg),
                        ImportTarget::System(m) => crate::parser::loader::SYSTEM_MODULES
                            .iter()
                            .find(|s| **s == &**m)
                            .map(|s| Def::SysModule(s)),
                        ImportTarget::Plugin(_) => None,
                    };
                    let ty = self.sema.import_ty(&t);
                    if let (Some(def), Some(last)) = (def, i.names.last()) {
                        self.occ(last.span, def, Role::ImportPath, ty.clone());
                    }
                    if let Some(local) = i.local_name() {
                        let decl = i.asname.map(|a| a.span).or_else(|| {
                            i.names
                                .last()
                                .filter(|_| i.asname.is_none())
                                .map(|n| n.span)
                        });
                        if let (Some(decl), Some(a)) = (decl, i.asname) {
                            self.occ(a.span, Def::Import { decl, name: local }, Role::Decl, ty);
                        }
                    }
                }
            }
            StmtKind::Assign(a) => {
                let expected = match &a.ty {
                    Some(t) => {
                        self.type_refs(t);
                        self.sema.resolve_type(self.pkg, self.file, t)
                    }
                    None => LTy::Any,
                };
                // a target that already holds a schema instance types the config it is given
                let mut expected = expected;
                if expected == LTy::Any
                    && let [t] = a.targets.as_slice()
                    && t.path.is_empty()
                    && let Some((_, ty)) = self.lookup(t.name.sym)
                    && !ty.schemas().is_empty()
                {
                    expected = ty;
                }
                let vt = self.expr(&a.value, &expected);
                let ty = if a.ty.is_some() {
                    expected.clone()
                } else {
                    vt.clone().widen()
                };
                for t in &a.targets {
                    self.target(t, ctx, &ty);
                    if a.ty.is_none()
                        && t.path.is_empty()
                        && ctx != Ctx::Lambda
                        && !matches!(ty, LTy::Any)
                        && !matches!(a.value.kind, ExprKind::Schema(_) | ExprKind::Lambda(_))
                    {
                        self.hints.push((t.name.span, ty.clone()));
                    }
                }
            }
            StmtKind::AugAssign(a) => {
                self.expr(&a.value, &LTy::Any);
                let ty = self.lookup(a.target.name.sym).map_or(LTy::Any, |x| x.1);
                self.target(&a.target, ctx, &ty);
            }
            StmtKind::Unification(u) => {
                let t = self.expr(&u.value, &LTy::Any);
                let def = self.bind(u.target, ctx, &t);
                self.occ(u.target.span, def, Role::Decl, t);
            }
            StmtKind::Assert(a) => {
                self.expr(&a.test, &LTy::Any);
                if let Some(c) = &a.if_cond {
                    self.expr(c, &LTy::Any);
                }
                if let Some(m) = &a.msg {
                    self.expr(m, &LTy::Any);
                }
            }
            StmtKind::If(i) => {
                self.expr(&i.cond, &LTy::Any);
                self.stmts(&i.body, ctx);
                self.stmts(&i.orelse, ctx);
            }
            StmtKind::SchemaAttr(a) => {
                for d in &a.decorators {
                    self.decorator(d);
                }
                self.type_refs(&a.ty);
                let ty = self.sema.resolve_type(self.pkg, self.file, &a.ty);
                if let Ctx::Schema(sr) = ctx {
                    let def = Def::Attr {
                        schema: sr,
                        attr: a.name.sym,
                        decl: a.name.span,
                    };
                    self.occ(a.name.span, def, Role::Decl, ty.clone());
                } else {
                    self.occ(
                        a.name.span,
                        Def::Top {
                            pkg: self.pkg,
                            name: a.name.sym,
                        },
                        Role::Decl,
                        ty.clone(),
                    );
                }
                if let Some(v) = &a.value {
                    self.expr(v, &ty);
                }
            }
            StmtKind::Schema(sc) => self.schema_stmt(sc, s.span),
            StmtKind::Rule(r) => {
                for d in &r.decorators {
                    self.decorator(d);
                }
                self.occ(
                    r.name.span,
                    Def::Top {
                        pkg: self.pkg,
                        name: r.name.sym,
                    },
                    Role::Decl,
                    LTy::Any,
                );
                for p in &r.parents {
                    self.ident_ref(p);
                }
                if let Some(h) = &r.for_host {
                    self.ident_ref(h);
                }
                self.scopes.push(Scope::default());
                self.mark(s.span);
                if let Some(ps) = &r.params {
                    self.params(ps);
                }
                for c in &r.checks {
                    self.check_expr(c);
                }
                self.scopes.pop();
            }
            StmtKind::TypeAlias(t) => {
                self.occ(
                    t.name.span,
                    Def::Top {
                        pkg: self.pkg,
                        name: t.name.sym,
                    },
                    Role::Decl,
                    LTy::Any,
                );
                self.type_refs(&t.ty);
            }
        }
    }

    fn schema_stmt(&mut self, sc: &SchemaStmt, span: Span) {
        for d in &sc.decorators {
            self.decorator(d);
        }
        let sr = SchemaRef {
            pkg: self.pkg,
            name: sc.name.sym,
        };
        self.occ(
            sc.name.span,
            Def::Top {
                pkg: self.pkg,
                name: sc.name.sym,
            },
            Role::Decl,
            LTy::SchemaType(sr),
        );
        for b in sc.parent.iter().chain(&sc.for_host).chain(&sc.mixins) {
            self.ident_ref(b);
        }
        self.scopes.push(Scope {
            names: Vec::new(),
            schema: Some(sr),
        });
        self.mark(span);
        if let Some(ps) = &sc.params {
            self.params(ps);
        }
        if let Some(ix) = &sc.index_signature {
            self.type_refs(&ix.key_ty);
            self.type_refs(&ix.value_ty);
            if let Some(k) = ix.key_name {
                let kt = self.sema.resolve_type(self.pkg, self.file, &ix.key_ty);
                self.declare(k, kt);
            }
            if let Some(v) = &ix.value {
                self.expr(v, &LTy::Any);
            }
        }
        self.stmts(&sc.body, Ctx::Schema(sr));
        for c in &sc.checks {
            self.check_expr(c);
        }
        self.scopes.pop();
    }

    fn check_expr(&mut self, c: &ast::CheckExpr) {
        self.mark(c.span);
        self.expr(&c.test, &LTy::Any);
        if let Some(x) = &c.if_cond {
            self.expr(x, &LTy::Any);
        }
        if let Some(x) = &c.msg {
            self.expr(x, &LTy::Any);
        }
    }

    fn decorator(&mut self, d: &ast::Decorator) {
        if let Some(a) = &d.args {
            self.call_args(a);
        }
    }

    fn params(&mut self, ps: &[ast::Param]) {
        for p in ps {
            let ty = match &p.ty {
                Some(t) => {
                    self.type_refs(t);
                    self.sema.resolve_type(self.pkg, self.file, t)
                }
                None => LTy::Any,
            };
            if let Some(d) = &p.default {
                self.expr(d, &ty);
            }
            self.declare(p.name, ty);
        }
    }

    /// Binds an assignment target's root name: package-level, a schema attribute, or local.
    fn bind(&mut self, name: Name, ctx: Ctx, ty: &LTy) -> Def {
        match ctx {
            Ctx::Module => Def::Top {
                pkg: self.pkg,
                name: name.sym,
            },
            Ctx::Schema(sr) => match self.sema.member(sr, name.sym) {
                Some(m) => Def::Attr {
                    schema: m.owner,
                    attr: name.sym,
                    decl: m.decl,
                },
                None => Def::Local {
                    decl: name.span,
                    name: name.sym,
                },
            },
            Ctx::Lambda => {
                if let Some(s) = self.scopes.last()
                    && let Some((_, d, _)) = s.names.iter().find(|(n, _, _)| *n == name.sym)
                {
                    return d.clone();
                }
                let def = Def::Local {
                    decl: name.span,
                    name: name.sym,
                };
                if let Some(s) = self.scopes.last_mut() {
                    s.names.push((name.sym, def.clone(), ty.clone()));
                }
                def
            }
        }
    }

    fn target(&mut self, t: &ast::Target, ctx: Ctx, ty: &LTy) {
        let def = self.bind(t.name, ctx, ty);
        let role = match (&def, ctx) {
            (Def::Local { decl, .. }, _) if *decl == t.name.span => Role::Decl,
            (Def::Top { pkg, name }, _)
                if self.sema.top(*pkg, *name).map(|x| x.name.span) == Some(t.name.span) =>
            {
                Role::Decl
            }
            (Def::Attr { decl, .. }, _) if *decl == t.name.span => Role::Decl,
            _ => Role::Write,
        };
        let root_ty = if t.path.is_empty() {
            ty.clone()
        } else {
            self.lookup(t.name.sym).map_or(LTy::Any, |x| x.1)
        };
        self.occ(t.name.span, def, role, root_ty.clone());
        let mut cur = root_ty;
        for p in &t.path {
            match p {
                ast::TargetPath::Attr(n) => {
                    if let Some((mt, d)) = self.sema.member_of(&cur, n.sym) {
                        self.occ(n.span, d, Role::Write, mt.clone());
                        cur = mt;
                    } else {
                        cur = LTy::Any;
                    }
                }
                ast::TargetPath::Index(e) => {
                    self.expr(e, &LTy::Any);
                    cur = cur.elem();
                }
            }
        }
    }

    /// References in a type annotation.
    fn type_refs(&mut self, t: &ast::Type) {
        use ast::TypeKind;
        match &t.kind {
            TypeKind::Named(id) => {
                self.ident_ref(id);
            }
            TypeKind::List(Some(e)) => self.type_refs(e),
            TypeKind::Dict(k, v) => {
                if let Some(k) = k {
                    self.type_refs(k);
                }
                if let Some(v) = v {
                    self.type_refs(v);
                }
            }
            TypeKind::Union(ts) => ts.iter().for_each(|x| self.type_refs(x)),
            TypeKind::Function { params, ret } => {
                params.iter().for_each(|x| self.type_refs(x));
                if let Some(r) = ret {
                    self.type_refs(r);
                }
            }
            _ => {}
        }
    }

    /// A dotted name in type position (`S`, `pkg.S`).
    fn ident_ref(&mut self, id: &ast::Identifier) -> Option<SchemaRef> {
        match id.names.as_slice() {
            [n] => {
                if let Some(top) = self.sema.top(self.pkg, n.sym) {
                    let ty = self.sema.top_ty(self.pkg, n.sym);
                    let _ = top;
                    self.occ(
                        n.span,
                        Def::Top {
                            pkg: self.pkg,
                            name: n.sym,
                        },
                        Role::Type,
                        ty,
                    );
                }
            }
            [p, n] => {
                if let Some((t, decl)) = self.sema.import(self.file, p.sym).cloned() {
                    let ty = self.sema.import_ty(&t);
                    self.occ(p.span, Def::Import { decl, name: p.sym }, Role::Read, ty);
                    if let Some(tp) = self.sema.target_pkg(&t)
                        && self.sema.top(tp, n.sym).is_some()
                    {
                        let ty = self.sema.top_ty(tp, n.sym);
                        self.occ(
                            n.span,
                            Def::Top {
                                pkg: tp,
                                name: n.sym,
                            },
                            Role::Type,
                            ty,
                        );
                    }
                }
            }
            _ => {}
        }
        self.sema.resolve_schema(self.pkg, self.file, &id.names)
    }

    fn call_args(&mut self, a: &ast::CallArgs) {
        for x in &a.args {
            self.expr(x, &LTy::Any);
        }
        for k in &a.keywords {
            self.expr(&k.value, &LTy::Any);
        }
    }

    /// Walks an expression expecting `expected` (the schema of a config literal comes from
    /// it), and returns its type.
    pub fn expr(&mut self, e: &Expr, expected: &LTy) -> LTy {
        if self.depth > 200 {
            return LTy::Any;
        }
        self.depth += 1;
        self.mark(e.span);
        let t = self.expr_inner(e, expected);
        self.depth -= 1;
        t
    }

    fn expr_inner(&mut self, e: &Expr, expected: &LTy) -> LTy {
        match &e.kind {
            ExprKind::Ident(sym) => match self.lookup(*sym) {
                Some((d, t)) => {
                    self.occ(e.span, d, Role::Read, t.clone());
                    t
                }
                None => LTy::Any,
            },
            ExprKind::Int(i) => LTy::Lit(Arc::from(i.to_string())),
            ExprKind::Float(f) => LTy::Lit(Arc::from(format!("{f:?}"))),
            ExprKind::NumberUnit { .. } => LTy::Int,
            ExprKind::Str(s) => LTy::Lit(Arc::from(format!("{s:?}"))),
            ExprKind::JoinedStr(parts) => {
                for p in parts.iter() {
                    if let ast::StrPart::Interp { expr, .. } = p {
                        self.expr(expr, &LTy::Any);
                    }
                }
                LTy::Str
            }
            ExprKind::Bool(b) => LTy::Lit(Arc::from(if *b { "True" } else { "False" })),
            ExprKind::None => LTy::None,
            ExprKind::Undefined | ExprKind::Missing => LTy::Any,
            ExprKind::Unary { op, operand } => {
                let t = self.expr(operand, &LTy::Any);
                match op {
                    ast::UnaryOp::Not => LTy::Bool,
                    _ => t.widen(),
                }
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.expr(left, expected).widen();
                let r = self.expr(right, expected).widen();
                use ast::BinOp::*;
                match op {
                    And | Or => LTy::union(vec![l, r]),
                    BitOr if !l.schemas().is_empty() => l,
                    BitOr if matches!(l, LTy::Dict(..)) => l,
                    Add | Sub | Mul | Div | Mod | Pow | FloorDiv => match (&l, &r) {
                        (LTy::Int, LTy::Int) if *op != Div => LTy::Int,
                        (LTy::Int | LTy::Float, LTy::Int | LTy::Float) => LTy::Float,
                        (LTy::Str, LTy::Str) if *op == Add => LTy::Str,
                        (LTy::Str, LTy::Int) if *op == Mul => LTy::Str,
                        (LTy::List(_), LTy::List(_)) if *op == Add => LTy::union(vec![l, r]),
                        _ => LTy::Any,
                    },
                    _ => match (&l, &r) {
                        (LTy::Int, LTy::Int) => LTy::Int,
                        _ => LTy::Any,
                    },
                }
            }
            ExprKind::Compare(c) => {
                self.expr(&c.left, &LTy::Any);
                for (_, x) in &c.ops {
                    self.expr(x, &LTy::Any);
                }
                LTy::Bool
            }
            ExprKind::If(i) => {
                self.expr(&i.cond, &LTy::Any);
                let a = self.expr(&i.then, expected);
                let b = self.expr(&i.orelse, expected);
                LTy::union(vec![a, b])
            }
            ExprKind::Selector(s) => {
                let t = self.expr(&s.value, &LTy::Any);
                match self.sema.member_of(&t, s.attr.sym) {
                    Some((mt, d)) => {
                        self.occ(s.attr.span, d, Role::Read, mt.clone());
                        mt
                    }
                    None => LTy::Any,
                }
            }
            ExprKind::Subscript { value, index, .. } => {
                let t = self.expr(value, &LTy::Any);
                self.expr(index, &LTy::Any);
                match t {
                    LTy::Dict(..) => t.value(),
                    t => t.elem(),
                }
            }
            ExprKind::Slice(s) => {
                let t = self.expr(&s.value, &LTy::Any);
                for x in s.lower.iter().chain(&s.upper).chain(&s.step) {
                    self.expr(x, &LTy::Any);
                }
                t
            }
            ExprKind::Call { func, args } => {
                let ft = self.expr(func, &LTy::Any);
                self.call_args(args);
                match ft {
                    LTy::Func(f) => f.1.clone(),
                    LTy::SchemaType(s) => LTy::Schema(s),
                    _ => LTy::Any,
                }
            }
            ExprKind::Paren(x) => self.expr(x, expected),
            ExprKind::List(items) => {
                let et = expected.elem();
                let mut ts = Vec::new();
                for x in items.iter() {
                    ts.push(self.expr(x, &et).widen());
                }
                LTy::List(Box::new(if ts.is_empty() {
                    LTy::Any
                } else {
                    LTy::union(ts)
                }))
            }
            ExprKind::ListIf(i) => {
                self.expr(&i.cond, &LTy::Any);
                for x in i.body.iter().chain(&i.orelse) {
                    self.expr(x, expected);
                }
                LTy::Any
            }
            ExprKind::Starred(x) => self.expr(x, &LTy::Any).elem(),
            ExprKind::Config(entries) => {
                self.config(e.span, entries, expected);
                if expected.schemas().is_empty() {
                    LTy::Dict(Box::new(LTy::Str), Box::new(LTy::Any))
                } else {
                    expected.clone()
                }
            }
            ExprKind::ListComp(c) => {
                self.scopes.push(Scope::default());
                self.clauses(&c.clauses);
                self.mark(e.span);
                let t = self.expr(&c.elt, &expected.elem());
                self.scopes.pop();
                LTy::List(Box::new(t.widen()))
            }
            ExprKind::DictComp(c) => {
                self.scopes.push(Scope::default());
                self.clauses(&c.clauses);
                self.mark(e.span);
                self.expr(&c.key, &LTy::Any);
                let v = self.expr(&c.value, &expected.value());
                self.scopes.pop();
                LTy::Dict(Box::new(LTy::Str), Box::new(v.widen()))
            }
            ExprKind::Quant(q) => {
                let it = self.expr(&q.target, &LTy::Any);
                self.scopes.push(Scope::default());
                let (a, b) = match (&it, q.vars.len()) {
                    (LTy::Dict(k, v), 2) => ((**k).clone(), (**v).clone()),
                    (LTy::List(e), 2) => (LTy::Int, (**e).clone()),
                    (t, _) => (t.elem(), LTy::Any),
                };
                for (i, v) in q.vars.iter().enumerate() {
                    self.declare(*v, if i == 0 { a.clone() } else { b.clone() });
                }
                self.mark(e.span);
                let t = self.expr(&q.test, &LTy::Any);
                if let Some(c) = &q.if_cond {
                    self.expr(c, &LTy::Any);
                }
                self.scopes.pop();
                match q.op {
                    ast::QuantOp::All | ast::QuantOp::Any => LTy::Bool,
                    ast::QuantOp::Map => LTy::List(Box::new(t.widen())),
                    ast::QuantOp::Filter => it,
                }
            }
            ExprKind::Schema(se) => {
                let sr = self.ident_ref(&se.name);
                if let Some(a) = &se.args {
                    self.call_args(a);
                }
                let t = sr.map_or(LTy::Any, LTy::Schema);
                self.expr(&se.config, &t);
                t
            }
            ExprKind::Lambda(l) => {
                self.scopes.push(Scope::default());
                self.mark(e.span);
                self.params(&l.params);
                let ret = match &l.ret {
                    Some(t) => {
                        self.type_refs(t);
                        Some(self.sema.resolve_type(self.pkg, self.file, t))
                    }
                    None => None,
                };
                let mut last = LTy::Any;
                for s in &l.body {
                    self.stmt(s, Ctx::Lambda);
                    if let StmtKind::Expr(x) = &s.kind {
                        // the value of the last expression is the result: typed again
                        // quietly (its names are already recorded)
                        let q = std::mem::replace(&mut self.quiet, true);
                        last = self.expr(x, &LTy::Any).widen();
                        self.quiet = q;
                    }
                }
                self.scopes.pop();
                let ret = ret.unwrap_or(last);
                self.sema.lambda_ty(self.pkg, self.file, l, ret)
            }
            ExprKind::As { value, ty } => {
                self.expr(value, &LTy::Any);
                self.type_refs(ty);
                self.sema.resolve_type(self.pkg, self.file, ty)
            }
        }
    }

    fn clauses(&mut self, clauses: &[ast::CompClause]) {
        for cl in clauses {
            let it = self.expr(&cl.iter, &LTy::Any);
            let (a, b) = match (&it, cl.targets.len()) {
                (LTy::Dict(k, v), 2) => ((**k).clone(), (**v).clone()),
                (LTy::List(e), 2) => (LTy::Int, (**e).clone()),
                (t, _) => (t.elem(), LTy::Any),
            };
            for (i, t) in cl.targets.iter().enumerate() {
                if let Some(n) = t.names.first() {
                    self.declare(*n, if i == 0 { a.clone() } else { b.clone() });
                }
            }
            for c in &cl.ifs {
                self.expr(c, &LTy::Any);
            }
        }
    }

    /// A config literal's entries: keys name the expected schema's attributes, values are
    /// walked expecting the attribute's type.
    fn config(&mut self, span: Span, entries: &[ConfigEntry], expected: &LTy) {
        let schemas = expected.schemas();
        if !self.quiet {
            self.configs.push((span, expected.clone()));
        }
        for en in entries {
            match &en.kind {
                ConfigEntryKind::KeyValue { key, value, .. } => {
                    let vt = self.key(key, expected, &schemas);
                    self.expr(value, &vt);
                }
                ConfigEntryKind::Unpack { value, .. } => {
                    self.expr(value, &LTy::Any);
                }
                ConfigEntryKind::If(ci) => self.config_if(ci, expected),
            }
        }
    }

    fn config_if(&mut self, ci: &ast::ConfigIf, expected: &LTy) {
        self.expr(&ci.cond, &LTy::Any);
        let schemas = expected.schemas();
        for en in ci.body.iter().chain(&ci.orelse) {
            match &en.kind {
                ConfigEntryKind::KeyValue { key, value, .. } => {
                    let vt = self.key(key, expected, &schemas);
                    self.expr(value, &vt);
                }
                ConfigEntryKind::Unpack { value, .. } => {
                    self.expr(value, &LTy::Any);
                }
                ConfigEntryKind::If(c) => self.config_if(c, expected),
            }
        }
    }

    /// A config key; returns the type its value should have.
    fn key(&mut self, key: &Expr, expected: &LTy, schemas: &[SchemaRef]) -> LTy {
        self.mark(key.span);
        let attr = |w: &mut Self, sym: Symbol, span: Span, on: &LTy| -> LTy {
            match w.sema.member_of(on, sym) {
                Some((t, d)) if !on.schemas().is_empty() => {
                    w.occ(span, d, Role::Key, t.clone());
                    t
                }
                _ => on.value(),
            }
        };
        match &key.kind {
            ExprKind::Ident(sym) => {
                if schemas.is_empty() {
                    expected.value()
                } else {
                    attr(self, *sym, key.span, expected)
                }
            }
            ExprKind::Str(s) => {
                if schemas.is_empty() {
                    return expected.value();
                }
                // the name inside the quotes
                let inner = Span::new(
                    key.span.file,
                    key.span.lo + 1,
                    key.span.hi.saturating_sub(1),
                );
                attr(self, Symbol::intern(s), inner, expected)
            }
            ExprKind::Selector(_) => {
                // `a.b.c: v` sets c of b of a
                let mut chain = Vec::new();
                let mut cur = key;
                loop {
                    match &cur.kind {
                        ExprKind::Selector(s) => {
                            chain.push((s.attr.sym, s.attr.span));
                            cur = &s.value;
                        }
                        ExprKind::Ident(sym) => {
                            chain.push((*sym, cur.span));
                            break;
                        }
                        _ => {
                            self.expr(cur, &LTy::Any);
                            return LTy::Any;
                        }
                    }
                }
                chain.reverse();
                let mut t = expected.clone();
                for (sym, sp) in chain {
                    t = attr(self, sym, sp, &t);
                }
                t
            }
            _ => {
                self.expr(key, &LTy::Any);
                expected.value()
            }
        }
    }
}

/// The attribute documentation in a schema docstring's numpy-style `Attributes` section:
/// `name : type, default is ..., required` then indented text.
pub fn attr_doc(doc: &str, attr: &str) -> Option<String> {
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines.iter().position(|l| l.trim() == "Attributes")?;
    let mut i = start + 1;
    if lines.get(i).is_some_and(|l| l.trim().starts_with("---")) {
        i += 1;
    }
    let indent = |l: &str| l.len() - l.trim_start().len();
    let mut base: Option<usize> = None;
    while i < lines.len() {
        let l = lines[i];
        if l.trim().is_empty() {
            i += 1;
            continue;
        }
        let ind = indent(l);
        let b = *base.get_or_insert(ind);
        if ind < b {
            break;
        }
        if ind == b {
            // a new section (`Examples` + dashes) ends the attributes
            if lines
                .get(i + 1)
                .is_some_and(|n| n.trim().starts_with("---"))
            {
                break;
            }
            let head = l.trim();
            let name = head.split(':').next().unwrap_or("").trim();
            if name == attr {
                let mut out = vec![head.to_string()];
                let mut j = i + 1;
                while j < lines.len() && (lines[j].trim().is_empty() || indent(lines[j]) > b) {
                    out.push(lines[j].trim().to_string());
                    j += 1;
                }
                while out.last().is_some_and(|s| s.is_empty()) {
                    out.pop();
                }
                return Some(out.join("\n"));
            }
        }
        i += 1;
    }
    None
}

/// A schema docstring without its `Attributes` section (the summary shown on hover).
pub fn doc_summary(doc: &str) -> String {
    let mut out = Vec::new();
    let lines: Vec<&str> = doc.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim();
        if l == "Attributes"
            && lines
                .get(i + 1)
                .is_some_and(|n| n.trim().starts_with("---"))
        {
            break;
        }
        out.push(l);
        i += 1;
    }
    while out.last().is_some_and(|s| s.is_empty()) {
        out.pop();
    }
    while out.first().is_some_and(|s| s.is_empty()) {
        out.remove(0);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_docs_from_numpy_docstrings() {
        let doc = "Server is the abstraction.\n\n    Attributes\n    ----------\n    name : str, default is Undefined, required\n        The name.\n        More.\n    image : str\n        The image.\n\n    Examples\n    --------\n    x\n";
        assert_eq!(
            attr_doc(doc, "name").as_deref(),
            Some("name : str, default is Undefined, required\nThe name.\nMore.")
        );
        assert_eq!(
            attr_doc(doc, "image").as_deref(),
            Some("image : str\nThe image.")
        );
        assert_eq!(attr_doc(doc, "x"), None);
        assert_eq!(doc_summary(doc), "Server is the abstraction.");
    }
}
