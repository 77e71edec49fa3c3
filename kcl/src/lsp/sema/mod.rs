//! The semantic model behind hover, completion, navigation, rename, semantic tokens and inlay
//! hints: package tables (schemas, rules, type aliases, variables, imports), schema members with
//! their types, defaults and docs, and a walk of a file that resolves every name to its
//! definition, with the expected schema of every config literal and the scopes at a position.
//!
//! The checker (`types`) reports errors and keeps no table an editor could ask; this model is
//! its reader's counterpart and, like it, one-sided: what it cannot type is `any`.
//!
//! Here: the package tables and the questions asked of them ([`Sema`]); [`ty`]: the types it
//! gives ([`LTy`]); [`walk`]: the walk of a file ([`Walker`]); [`doc`]: schema docstrings.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::ast::{
    self, Expr, ExprKind, FileId, Module, Name, SchemaStmt, Span, Stmt, StmtKind, Symbol,
};
use crate::parser::loader::{ImportTarget, MAIN_PKG, Program};

use super::db::{FileData, UnitResult, lock};
use super::signatures;

mod doc;
mod ty;
mod walk;

pub use doc::{attr_doc, doc_summary};
pub use ty::{LTy, SchemaRef};
pub use walk::{ScopeSnapshot, Walked, Walker};

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
