//! The type of an expression, including comprehensions and lambda bodies (config literals are
//! in `config.rs`).
//!
//! Over 800 lines: one walk over the expression kinds and the helpers only it uses
//! (selectors, lambdas, comprehensions), in upstream's resolver order; split by kind, the
//! order of the errors would be spread over files.

use super::config::literal_keys;
use super::*;

impl<'a> Checker<'a> {
    /// The type of `e` (`any` when unknown), checking sub-expressions on the way.
    pub(super) fn infer(&mut self, env: &Env, e: &Expr) -> Ty {
        let t = self.infer_expr(env, e);
        // a config key's value: later entries see the key with this type
        if self.key_want.contains(&e.span) {
            self.key_tys.insert(e.span, t.clone());
        }
        t
    }

    fn infer_expr(&mut self, env: &Env, e: &Expr) -> Ty {
        match &e.kind {
            ExprKind::Int(i) => Ty::IntLit(*i),
            ExprKind::Float(f) => Ty::FloatLit(*f),
            ExprKind::Bool(b) => Ty::BoolLit(*b),
            ExprKind::Str(s) => Ty::StrLit(s.clone()),
            ExprKind::None => Ty::None,
            // upstream types `Undefined` as `NoneType`
            ExprKind::Undefined => Ty::None,
            ExprKind::NumberUnit { value, suffix } => Ty::Unit(Some(std::sync::Arc::from(
                format!("{value}{}", suffix.as_str()).as_str(),
            ))),
            ExprKind::JoinedStr(parts) => {
                for p in parts {
                    if let ast::StrPart::Interp { expr, spec } = p {
                        // upstream's resolver knows two format specs, and checks the spec
                        // before the expression
                        if let Some(spec) = spec.as_deref()
                            && !matches!(spec.to_ascii_lowercase().as_str(), "#json" | "#yaml")
                        {
                            let msg = format!("{spec} is a invalid format spec");
                            self.err(ErrKind::Compile, msg, expr.span);
                        }
                        self.infer(env, expr);
                    }
                }
                Ty::Str
            }
            ExprKind::Ident(s) => {
                self.check_defined(env, *s, e.span);
                self.resolved_at = e.span.shrink_to_lo();
                self.lookup_at(env, *s, Some(e.span.lo))
            }
            ExprKind::Paren(x) => self.infer(env, x),
            ExprKind::Unary { op, operand } => {
                let t = self.infer(env, operand);
                self.unary(*op, &t, operand.span)
            }
            ExprKind::Binary { op, left, right } => {
                let l = self.infer(env, left);
                let r = self.infer(env, right);
                self.binary(*op, &l, &r, e.span)
            }
            ExprKind::Compare(c) => {
                // upstream compares a union as its variable type: literals widened (`"a" |
                // "b"` is `str`), subsumed members dropped, a None member making it `any`
                let mut l = self.infer(env, &c.left);
                l = literal_union_widened(&l, &|a, b| self.is_sub_schema(a, b));
                for (op, r) in &c.ops {
                    let rt = self.infer(env, r);
                    let rt = literal_union_widened(&rt, &|a, b| self.is_sub_schema(a, b));
                    if !compare_allowed(*op, &l, &rt) {
                        let msg = format!(
                            "unsupported operand type(s) for {}: '{}' and '{}'",
                            op.as_str(),
                            self.ty_str(&l),
                            self.ty_str(&rt)
                        );
                        self.err(ErrKind::Type, msg, e.span.shrink_to_lo());
                    }
                    l = rt;
                }
                Ty::Bool
            }
            ExprKind::If(x) => {
                self.infer(env, &x.cond);
                let a = self.infer(env, &x.then);
                let b = self.infer(env, &x.orelse);
                if a.is_any() || b.is_any() {
                    Ty::Any
                } else {
                    sup(vec![a, b], &|x, y| self.is_sub_schema(x, y))
                }
            }
            ExprKind::Selector(x) => self.infer_selector(env, x),
            ExprKind::Subscript { value, index, .. } => self.infer_subscript(env, value, index),
            ExprKind::Slice(sl) => self.infer_slice(env, sl),
            ExprKind::Call { func, args } => self.infer_call(env, e, func, args),
            ExprKind::List(items) => {
                let mut ts = Vec::with_capacity(items.len());
                let mut known = true;
                for x in items {
                    // `*xs` brings the unpacked list's items (a dict's keys)
                    let t = match &x.kind {
                        ExprKind::Starred(inner) => match self.infer(env, inner) {
                            Ty::List(e) => (*e).clone(),
                            Ty::Dict(k, _) => (*k).clone(),
                            t => {
                                // upstream's resolver unpacks only these (its message says
                                // "any" whatever the type)
                                if !unpackable(&t) {
                                    self.err(
                                        ErrKind::Compile,
                                        "only list, dict, schema object can be used * unpacked, got any".into(),
                                        inner.span.shrink_to_lo(),
                                    );
                                }
                                Ty::Any
                            }
                        },
                        _ => self.infer(env, x),
                    };
                    if t.is_any() || matches!(x.kind, ExprKind::ListIf(_)) {
                        known = false;
                    }
                    ts.push(t);
                }
                if known && !ts.is_empty() {
                    Ty::List(Rc::new(sup(ts, &|x, y| self.is_sub_schema(x, y))))
                } else {
                    Ty::List(Rc::new(Ty::Any))
                }
            }
            ExprKind::ListIf(li) => {
                self.infer(env, &li.cond);
                for x in li.body.iter().chain(&li.orelse) {
                    self.infer(env, x);
                }
                Ty::Any
            }
            ExprKind::Starred(x) => {
                self.infer(env, x);
                Ty::Any
            }
            ExprKind::Config(entries) => self.infer_config(env, entries),
            ExprKind::ListComp(c) => {
                let env2 = self.comp_env(env, &c.clauses);
                let t = match &c.elt.kind {
                    ExprKind::Starred(_) => {
                        self.err(
                            ErrKind::Compile,
                            "list unpacking cannot be used in list comprehension".into(),
                            c.elt.span.shrink_to_lo(),
                        );
                        self.infer(&env2, &c.elt);
                        Ty::Any
                    }
                    _ => self.infer(&env2, &c.elt),
                };
                Ty::List(Rc::new(t))
            }
            ExprKind::DictComp(c) => {
                let env2 = self.comp_env(env, &c.clauses);
                let k = self.infer(&env2, &c.key);
                // a comprehension's key must be a string too (upstream's resolver)
                self.check_str_key(&k, c.key.span.shrink_to_lo(), true);
                let v = self.infer(&env2, &c.value);
                // (an unknown key or value type stays as it is: `{any:int(1)}`)
                Ty::Dict(Rc::new(k), Rc::new(v))
            }
            ExprKind::Quant(q) => self.infer_quant(env, q),
            ExprKind::Schema(se) => self.infer_schema_expr(env, e, se),
            ExprKind::Lambda(l) => self.infer_lambda(env, l),
            ExprKind::As { value, ty } => {
                let got = self.infer(env, value);
                // upstream reads the right operand as an expression: a name, nothing else
                if !matches!(
                    ty.kind,
                    ast::TypeKind::Named(_) | ast::TypeKind::Basic(_) | ast::TypeKind::Any
                ) {
                    // (a union of names and literals is an expression `a | b` to upstream,
                    // whose operands' types it reports first: `int | str` are functions)
                    if let ast::TypeKind::Union(ms) = &ty.kind {
                        self.type_union_as_expr(env, ms, ty.span);
                    } else {
                        // (`{str:T}` and `[T]` are a dict and a list of names to it)
                        self.names_of_type_as_expr(env, ty);
                    }
                    let msg = "keyword 'as' right operand must be a type".to_string();
                    self.err(ErrKind::Compile, msg, value.span.shrink_to_lo());
                    return got;
                }
                self.check_as_type_names(env, ty);
                // a value of unknown type stays unknown (upstream's resolver leaves `any as
                // int` to the run time)
                if got.is_any() {
                    return Ty::Any;
                }
                let t = self.resolve_type(env.pkg, env.file, ty);
                let sub = |a: SchemaId, b: SchemaId| self.is_sub_schema(a, b);
                // the target must be the value's (widened) type or a subtype of it: `1 as
                // int`, `1.0 as int` and a base as its subschema pass; `1 as float`, a
                // subschema as its base and a dict as a schema do not
                if !got.is_any() && !t.is_any() && !sup_subsume(&t, &got.variable_type(), &sub) {
                    // (a union is named by upstream's `sup` of it: `int | float` is `float`)
                    // (its literals widened: `1 | 2` is `int`)
                    let shown = match &got {
                        Ty::Union(ts) => sup(ts.iter().map(Ty::widen).collect(), &sub),
                        t => t.clone(),
                    };
                    let msg = format!(
                        "Conversion of type '{}' to type '{}' may be a mistake because neither type sufficiently overlaps with the other",
                        self.ty_str(&shown),
                        self.ty_str(&t)
                    );
                    self.err(ErrKind::Type, msg, value.span.shrink_to_lo());
                }
                t
            }
            ExprKind::Missing => Ty::Any,
        }
    }

    /// `value.attr`: a package member, a schema attribute, a dict value or a method.
    fn infer_selector(&mut self, env: &Env, x: &ast::SelectorExpr) -> Ty {
        let (value, attr) = (&x.value, &x.attr);
        if let ExprKind::Ident(s) = &value.kind
            && env.locals.iter().all(|(n, _)| n != s)
            && !self.is_schema_member(env, *s)
            && let Some(tp) = self.pkg_of_import(value.span.file, *s)
        {
            if let Some(&id) = self.pkgs[tp].schemas.get(&attr.sym) {
                return Ty::SchemaType(id);
            }
            if let Some(&(t, f)) = self.pkgs[tp].globals.get(&attr.sym) {
                return self.resolve_type(tp, f, t);
            }
            // a module the package imports is none of its members; any other name it does
            // not have is upstream's resolver error too, at the module
            let imported = self.pkgs[tp]
                .modules
                .iter()
                .any(|m| self.imports.contains_key(&(m.file, attr.sym)));
            if imported {
                let msg = format!(
                    "can not import the attribute '{}' from the module '{}'",
                    attr.sym.as_str(),
                    self.pkgs[tp].path
                );
                self.err(ErrKind::Compile, msg, value.span.shrink_to_lo());
            } else {
                self.check_module_member(value.span.file, *s, attr.sym, value.span);
            }
            return Ty::Any;
        }
        // a member a system module does not have: upstream's resolver error
        if let ExprKind::Ident(sym) = &value.kind
            && env.locals.iter().all(|(n, _)| n != sym)
            && !self.is_schema_member(env, *sym)
            && let Some(m) = self.system_module_of(value.span.file, *sym)
        {
            let name = crate::builtins::system_module_name(m).unwrap_or(m);
            if crate::builtins::system_member(name, attr.sym.as_str()).is_none() {
                let msg = format!(
                    "attribute '{}' not found in 'module '{m}''",
                    attr.sym.as_str()
                );
                self.err(ErrKind::Type, msg, value.span.shrink_to_lo());
                return Ty::Any;
            }
            return match sysmod::signature(name, attr.sym.as_str()) {
                Some(f) => Ty::Func(f),
                None => sysmod::constant(name, attr.sym.as_str()).unwrap_or(Ty::Any),
            };
        }
        let t = self.infer(env, value);
        self.last_receiver = Some((value.span, t.clone()));
        // a key a config literal has: its value's variable type (upstream's record of the
        // literal's type per key)
        if let (Ty::Dict(..), ExprKind::Config(entries)) = (&t, &strip_paren(value).kind) {
            let hit = entries.iter().rev().find_map(|en| match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, value: v, .. } => match &key.kind {
                    ExprKind::Ident(n) if *n == attr.sym => Some(v),
                    ExprKind::Str(k) if **k == *attr.sym.as_str() => Some(v),
                    _ => None,
                },
                _ => None,
            });
            if let Some(v) = hit {
                return self.infer(env, v).variable_type();
            }
        }
        match t {
            // upstream's resolver reads a schema's attribute on the schema as on an instance
            // (the run time then finds no such attribute on the type)
            Ty::SchemaType(id) if attr.sym.as_str() != "instances" => {
                let at = attr_error_at(value, attr.span, x.optional);
                self.instance_attr(env, id, value, attr.sym.as_str(), at)
            }
            Ty::SchemaType(_) => {
                // upstream's `instances(full_pkg: bool = False) -> [any]`
                Ty::Func(Rc::new(ty::FuncTy {
                    params: vec![(Some(crate::ast::Symbol::intern("full_pkg")), Ty::Bool, true)],
                    ret: Ty::List(Rc::new(Ty::Any)),
                    param_spans: Vec::new(),
                }))
            }
            Ty::Schema(id) => {
                let at = attr_error_at(value, attr.span, x.optional);
                self.instance_attr(env, id, value, attr.sym.as_str(), at)
            }
            // upstream's resolver knows these types have no attributes but the string
            // methods
            _ if t.has_no_attributes() => {
                let str_method = matches!(t, Ty::Str | Ty::StrLit(_))
                    && crate::builtins::STR_METHODS.contains(&attr.sym.as_str());
                // `?.` changes nothing here: upstream's resolver checks the type
                if !str_method {
                    let msg = format!(
                        "attribute '{}' not found in '{}'",
                        attr.sym.as_str(),
                        self.ty_str(&t)
                    );
                    self.err(
                        ErrKind::Type,
                        msg,
                        attr_error_at(value, attr.span, x.optional),
                    );
                }
                Ty::Any
            }
            // a dict's attribute is one of its values (upstream knows a literal's type
            // per key, which a union of the values' types does not tell)
            Ty::Dict(k, v) if !matches!(*v, Ty::Union(_)) => {
                dict_value_read(&k, &v, Some(attr.sym.as_str()))
            }
            // a key the literal does not have: the union of its values' types
            Ty::Dict(_, v) if self.literal_lacks_key(env, value, attr.sym) => (*v).clone(),
            _ => Ty::Any,
        }
    }

    /// Whether `value` is a config literal (or a package-level name holding one) whose keys
    /// are all known and do not include `key`.
    fn literal_lacks_key(&mut self, env: &Env, value: &Expr, key: Symbol) -> bool {
        let e = strip_paren(value);
        let entries = match &e.kind {
            ExprKind::Config(entries) => entries,
            // a filter keeps the literal's type (its keys included)
            ExprKind::Quant(q) if q.op == ast::QuantOp::Filter => {
                return self.literal_lacks_key(env, &q.target, key);
            }
            ExprKind::Ident(s)
                if env.locals.iter().all(|(n, _)| n != s)
                    && !env.keys.iter().any(|(k, _, _)| k == s)
                    && !self.is_schema_member(env, *s) =>
            {
                match self.pkgs[env.pkg].inferred.get(s) {
                    Some(&(x, _)) => match &strip_paren(x).kind {
                        ExprKind::Config(entries) => entries,
                        _ => return false,
                    },
                    None => return false,
                }
            }
            _ => return false,
        };
        let mut keys = Vec::new();
        if !literal_keys(entries, &mut keys) {
            return false;
        }
        !keys.iter().any(|k| k == key.as_str())
    }

    /// Attribute `name` of an instance of schema `id` read from `value` (`value.name` or
    /// `value["name"]`): its type, or upstream's "not found" at `at` when the schema takes no
    /// other keys.
    fn instance_attr(&mut self, env: &Env, id: SchemaId, value: &Expr, name: &str, at: Span) -> Ty {
        let m = self.members(id);
        if let Some(a) = m.attrs.get(&Symbol::intern(name)) {
            return a.0.clone();
        }
        if !m.open {
            // upstream suggests attributes only on a value it knows as an instance; a name
            // typed by an annotation is the schema itself, whose only attribute is `instances`
            let order: Vec<&str> = m.order.iter().map(|s| s.as_str()).collect();
            let cands = if self.known_instance(env, value) {
                order
            } else {
                vec!["instances"]
            };
            let msg = format!(
                "attribute '{name}' not found in '{}'{}",
                self.schema_name(id),
                did_you_mean(name, cands)
            );
            self.err(ErrKind::Type, msg, at);
        }
        Ty::Any
    }

    /// `value[index]`.
    fn infer_subscript(&mut self, env: &Env, value: &Expr, index: &Expr) -> Ty {
        let t = self.infer(env, value);
        // upstream's resolver looks at the index only where the value can be subscripted (not
        // at all when it is `any`)
        if t.is_any() || self.not_subscriptable(&t, value.span) {
            return Ty::Any;
        }
        let it = self.infer(env, index);
        match &t {
            Ty::Str | Ty::StrLit(_) | Ty::List(_) if !int_index(&it) => {
                let msg = format!("expected int, got {}", self.ty_str(&it));
                self.err(ErrKind::Type, msg, index.span.shrink_to_lo());
                return Ty::Any;
            }
            Ty::Dict(..) | Ty::Schema(_) | Ty::SchemaType(_)
                if it.kind().is_some_and(|k| k != Kind::Str) =>
            {
                let msg = format!("invalid dict/schema key type: '{}'", self.ty_str(&it));
                self.err(ErrKind::Compile, msg, value.span.shrink_to_lo());
                return Ty::Any;
            }
            _ => {}
        }
        match t {
            Ty::List(e) => (*e).clone(),
            // `inst["name"]`: an attribute, as `inst.name`
            Ty::Schema(id) => match &strip_paren(index).kind {
                ExprKind::Str(k) => {
                    self.instance_attr(env, id, value, k, value.span.shrink_to_lo())
                }
                _ => Ty::Any,
            },
            Ty::Dict(k, v) => {
                let key = match &strip_paren(index).kind {
                    ExprKind::Str(s) => Some(&**s),
                    _ => None,
                };
                dict_value_read(&k, &v, key)
            }
            Ty::Str | Ty::StrLit(_) => Ty::Str,
            _ => Ty::Any,
        }
    }

    /// `value[lo:hi:step]`.
    fn infer_slice(&mut self, env: &Env, sl: &ast::SliceExpr) -> Ty {
        let t = self.infer(env, &sl.value);
        // (the bounds only where the value can be sliced, as an index)
        if t.is_any() || self.not_subscriptable(&t, sl.value.span) {
            return Ty::Any;
        }
        let bounds: Vec<(Ty, Span)> = [&sl.lower, &sl.upper, &sl.step]
            .into_iter()
            .flatten()
            .map(|x| (self.infer(env, x), x.span))
            .collect();
        match &t {
            Ty::Str | Ty::StrLit(_) | Ty::List(_) => {
                // (each bound that is no index)
                let mut bad = false;
                for (bt, at) in bounds.iter().filter(|(bt, _)| !int_index(bt)) {
                    let msg = format!("expected int, got {}", self.ty_str(bt));
                    self.err(ErrKind::Type, msg, at.shrink_to_lo());
                    bad = true;
                }
                if bad {
                    return Ty::Any;
                }
                t.widen()
            }
            Ty::Dict(..) | Ty::Schema(_) => {
                let msg = "unhashable type: 'slice'".to_string();
                self.err(ErrKind::Compile, msg, sl.value.span.shrink_to_lo());
                Ty::Any
            }
            _ => Ty::Any,
        }
    }

    /// The members of a type union written where an expression is read (`x as int | str`),
    /// typed as the expression `a | b | ...`: names as values, literals as literals.
    /// The names in a dict or list type read as an expression (the right operand of `as`):
    /// each must be defined (a dict's values; its keys are the keys' text).
    fn names_of_type_as_expr(&mut self, env: &Env, ty: &ast::Type) {
        match &ty.kind {
            ast::TypeKind::Named(id) => self.check_defined(env, id.names[0].sym, id.names[0].span),
            ast::TypeKind::List(Some(e)) => self.names_of_type_as_expr(env, e),
            // (a name as a config key is the key's text)
            ast::TypeKind::Dict(_, Some(v)) => self.names_of_type_as_expr(env, v),
            _ => {}
        }
    }

    fn type_union_as_expr(&mut self, env: &Env, ms: &[ast::Type], at: Span) {
        let mut acc: Option<Ty> = None;
        for m in ms {
            let t = match &m.kind {
                ast::TypeKind::Basic(b) => {
                    let name = match b {
                        ast::BasicType::Bool => "bool",
                        ast::BasicType::Int => "int",
                        ast::BasicType::Float => "float",
                        ast::BasicType::Str => "str",
                    };
                    self.lookup(env, Symbol::intern(name))
                }
                // (a schema as a value joins anything with `|` there)
                ast::TypeKind::Named(id) if id.names.len() == 1 => {
                    match self.lookup(env, id.names[0].sym) {
                        Ty::SchemaType(_) => Ty::Any,
                        t => t,
                    }
                }
                ast::TypeKind::Literal(_) => self.resolve_type(env.pkg, env.file, m),
                _ => Ty::Any,
            };
            acc = Some(match acc {
                None => t,
                Some(l) => self.binary(ast::BinOp::BitOr, &l, &t, at),
            });
        }
    }

    /// A quantifier (`all`, `any`, `map`, `filter`) over a list, dict or string.
    fn infer_quant(&mut self, env: &Env, q: &ast::QuantExpr) -> Ty {
        let it = self.infer(env, &q.target);
        // (after the target's own errors, as a comprehension's)
        if let Some(v) = q.vars.iter().find(|v| v.sym.as_str().contains('.')) {
            let msg = "loop variables can only be ordinary identifiers".to_string();
            self.err(ErrKind::Compile, msg, v.span.shrink_to_lo());
        }
        // (as a comprehension's)
        for t in not_iterable_members(&it) {
            let msg = format!("'{}' object is not iterable", self.ty_str(&t));
            self.err(ErrKind::Compile, msg, q.target.span.shrink_to_lo());
        }
        let tys = loop_var_types(&it, q.vars.len());
        let mut env2 = env.clone();
        for (i, v) in q.vars.iter().enumerate() {
            // (a dotted one, `i.j`, names its first part only, as a comprehension's)
            if let Some((first, _)) = v.sym.as_str().split_once('.') {
                env2 = env2.with_loop_var(ast::Symbol::intern(first), Ty::Any);
                continue;
            }
            env2 = env2.with_loop_var(v.sym, tys.get(i).cloned().unwrap_or(Ty::Any));
        }
        let test = self.infer(&env2, &q.test);
        if let Some(c) = &q.if_cond {
            self.infer(&env2, c);
        }
        // upstream: all/any are bool, filter keeps the iterated type, map lists the
        // test's
        match q.op {
            ast::QuantOp::All | ast::QuantOp::Any => Ty::Bool,
            ast::QuantOp::Filter if matches!(it, Ty::List(_) | Ty::Dict(..)) => it,
            ast::QuantOp::Map => Ty::List(Rc::new(test)),
            _ => Ty::Any,
        }
    }

    /// `Name(args) {config}`: a schema instantiation.
    fn infer_schema_expr(&mut self, env: &Env, e: &Expr, se: &ast::SchemaExpr) -> Ty {
        let head = se.name.names[0];
        let before = self.errors.len();
        self.check_defined(env, head.sym, head.span);
        let id = self.resolve_schema(env.pkg, env.file, &se.name.names);
        // a module's member it does not have: upstream's resolver error, at the module
        if id.is_none()
            && self.errors.len() == before
            && let [m, member] = &se.name.names[..]
            && env.locals.iter().all(|(n, _)| *n != m.sym)
        {
            self.check_module_member(m.span.file, m.sym, member.sym, m.span);
        }
        let name_ok = self.errors.len() == before;
        // (after the name's own errors, as upstream's resolver walks the name first)
        if matches!(se.config.kind, ExprKind::DictComp(_)) {
            self.err(
                ErrKind::Compile,
                "Invalid schema config expr, expect config entries, e.g., {k1 = v1, k2 = v2}"
                    .to_string(),
                se.config.span.shrink_to_lo(),
            );
        }
        // a name whose type is known and takes no config: upstream's compile error (the
        // config is still checked)
        let mut name_ty = None;
        if id.is_none() && name_ok {
            let path: Vec<(Symbol, Span)> = se.name.names.iter().map(|n| (n.sym, n.span)).collect();
            if let Some(name) = path_expr(&path) {
                let kept = self.errors.len();
                let t = self.infer(env, &name);
                self.errors.truncate(kept);
                // a name of type `any` (a lambda's parameter, `f: any = S`) or `None`: upstream's
                // resolver walks neither the config nor the arguments; they meet the run only
                if matches!(t, Ty::Any | Ty::None) && self.rule_named(env, se).is_none() {
                    self.unchecked_configs.insert(e.span);
                    return Ty::Any;
                }
                if !matches!(
                    t,
                    Ty::Any | Ty::None | Ty::Schema(_) | Ty::SchemaType(_) | Ty::Dict(..)
                ) {
                    let msg = format!("Invalid schema type '{}'", self.ty_str(&t));
                    self.err(ErrKind::Compile, msg, se.name.span.shrink_to_lo());
                }
                name_ty = Some(t);
            }
        }
        // `S {}` of a schema with required parameters: upstream's resolver checks the missing
        // arguments as a call's
        let no_args = ast::CallArgs::default();
        let checked_call = match (&se.args, id) {
            (Some(a), Some(id)) if self.schema_is_plain(id) => Some((id, a)),
            (None, Some(id))
                if self.schema_is_plain(id)
                    && self.schemas[id.0]
                        .stmt
                        .params
                        .iter()
                        .flatten()
                        .any(|p| p.default.is_none()) =>
            {
                Some((id, &no_args))
            }
            _ => None,
        };
        // upstream checks the config before the call's arguments
        let ty = match (id, &strip_paren(&se.config).kind) {
            (Some(id), ExprKind::Config(entries)) if self.schema_is_plain(id) => {
                self.check_schema_config(env, entries, &[id]);
                Ty::Schema(id)
            }
            (Some(id), _) if self.schema_is_plain(id) => {
                self.infer(env, &se.config);
                Ty::Schema(id)
            }
            (None, ExprKind::Config(entries)) => {
                // `inst {...}` on a name holding an instance: its schema's config
                if let [n] = se.name.names.as_slice()
                    && let Ty::Schema(sid) = self.lookup(env, n.sym)
                    && self.schema_is_plain(sid)
                {
                    self.check_schema_config(env, entries, &[sid]);
                    Ty::Schema(sid)
                } else if let Some(Ty::SchemaType(sid)) = name_ty
                    && self.schema_is_plain(sid)
                {
                    // a name holding the schema itself (`f = S` then `f {...}`)
                    self.check_schema_config(env, entries, &[sid]);
                    Ty::Schema(sid)
                } else {
                    if !self.check_rule_config(env, se, entries) {
                        self.infer(env, &se.config);
                    }
                    Ty::Any
                }
            }
            _ => {
                self.infer(env, &se.config);
                Ty::Any
            }
        };
        if let Some((id, args)) = checked_call {
            let f = self.schema_params(id);
            let name = se
                .name
                .names
                .iter()
                .map(|n| n.sym.as_str())
                .collect::<Vec<_>>();
            self.lambda_call(env, Some(name.join(".")), &f, args, e.span);
        } else if let Some(f) = id
            .is_none()
            .then(|| {
                se.name
                    .names
                    .iter()
                    .map(|n| (n.sym, n.span))
                    .collect::<Vec<_>>()
            })
            .and_then(|path| path_expr(&path))
            .and_then(|callee| self.rule_params(env, &callee))
            .filter(|f| se.args.is_some() || f.params.iter().any(|p| !p.2))
        {
            // a rule's arguments, as a call's
            let args = se.args.as_ref().unwrap_or(&no_args);
            let name = se.name.names.iter().map(|n| n.sym.as_str());
            let name = name.collect::<Vec<_>>().join(".");
            self.lambda_call(env, Some(name), &f, args, e.span);
        } else if let Some(a) = &se.args {
            for x in &a.args {
                self.infer(env, x);
            }
            for k in &a.keywords {
                self.infer(env, &k.value);
            }
        }
        ty
    }

    /// The rule a schema expression's name stands for: its statement, file and package.
    fn rule_named(
        &self,
        env: &Env,
        se: &ast::SchemaExpr,
    ) -> Option<(&'a ast::RuleStmt, FileId, usize)> {
        let (pkg, name) = match se.name.names.as_slice() {
            [n] => (Some(env.pkg), n.sym),
            [m, n] => (self.pkg_of_import(m.span.file, m.sym), n.sym),
            _ => return None,
        };
        let pkg = pkg?;
        let &(rule, file) = self.pkgs[pkg].rules.get(&name)?;
        Some((rule, file, pkg))
    }

    /// A rule's config may set only the attributes of the protocol the rule is for (none
    /// without one; its parents' protocols give none): upstream's `Cannot add member` at each
    /// other key, the protocol's types checked at the others, in the config's order. False
    /// when the name is no rule (or its protocol is not known).
    fn check_rule_config(
        &mut self,
        env: &Env,
        se: &ast::SchemaExpr,
        entries: &[ast::ConfigEntry],
    ) -> bool {
        let Some((rule, file, pkg)) = self.rule_named(env, se) else {
            return false;
        };
        let (allowed, host): (Vec<Symbol>, _) = match &rule.for_host {
            None => (Vec::new(), None),
            Some(h) => {
                let Some(id) = self.resolve_schema(pkg, file, &h.names) else {
                    return false;
                };
                // (a protocol whose members are not all known is not judged)
                let m = self.members(id);
                if m.unresolved {
                    return false;
                }
                (m.attrs.keys().copied().collect(), Some(id))
            }
        };
        for en in entries {
            let unknown = match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, .. } => key_path(key)
                    .filter(|path| !allowed.contains(&path[0].0))
                    .map(|path| (path[0].0, key.span)),
                _ => None,
            };
            match (unknown, host) {
                (Some((k, at)), _) => {
                    let msg = format!(
                        "Cannot add member '{}' to schema '{}'",
                        k.as_str(),
                        rule.name.sym.as_str()
                    );
                    self.err(ErrKind::Compile, msg, at.shrink_to_lo());
                }
                (None, Some(host)) => {
                    self.check_schema_config(env, std::slice::from_ref(en), &[host])
                }
                (None, None) => {}
            }
        }
        if host.is_none() {
            self.infer(env, &se.config);
        }
        true
    }

    /// A lambda: its parameters' and return types.
    fn infer_lambda(&mut self, env: &Env, l: &ast::LambdaExpr) -> Ty {
        self.check_param_order(&l.params);
        let mut env2 = env.clone();
        for n in self.lambda_names.clone() {
            if env2.locals.iter().all(|(m, _)| *m != n) {
                env2 = env2.with_local(n, Ty::Any);
            }
        }
        let mut params = Vec::with_capacity(l.params.len());
        for p in &l.params {
            if let Some(d) = &p.default {
                self.infer(env, d);
            }
            if let Some(t) = &p.ty {
                self.check_type_names(env, t);
            }
            let t = match &p.ty {
                Some(t) => self.resolve_type(env.pkg, env.file, t),
                None => Ty::Any,
            };
            env2 = env2.with_local(p.name.sym, t.clone());
            params.push((Some(p.name.sym), t, p.default.is_some()));
        }
        // assignments in the body are locals from where they are reached (see
        // `lambda_body_inner`); those under an `if` from the start
        let mut locals = Vec::new();
        for s in &l.body {
            if let StmtKind::If(i) = &s.kind {
                collect_assigned(&i.body, &mut locals);
                collect_assigned(&i.orelse, &mut locals);
            }
        }
        for s in locals {
            env2 = env2.with_local(s, Ty::Any);
        }
        if let Some(t) = &l.ret {
            self.check_type_names(env, t);
        }
        let declared = l
            .ret
            .as_ref()
            .map(|t| self.resolve_type(env.pkg, env.file, t));
        let ret_at = std::mem::replace(&mut self.lambda_ret_at, l.ret.as_ref().map(|t| t.span));
        let ret = self.lambda_body(&env2, &l.body, declared.as_ref());
        self.lambda_ret_at = ret_at;
        Ty::Func(Rc::new(ty::FuncTy {
            params,
            ret: declared.unwrap_or(ret),
            param_spans: l.params.iter().map(|p| p.name.span).collect(),
        }))
    }

    /// The type of a method call's receiver, where it is known without inferring it again: a
    /// literal, a name, or the receiver of the selector inferred last.
    pub(super) fn receiver_ty(&mut self, env: &Env, recv: &Expr) -> Ty {
        match &recv.kind {
            ExprKind::Str(_) | ExprKind::JoinedStr(_) => Ty::Str,
            ExprKind::Ident(s) => self.lookup(env, *s),
            _ => match &self.last_receiver {
                Some((sp, t)) if *sp == recv.span => t.clone(),
                _ => Ty::Any,
            },
        }
    }

    /// Whether `t` is a type upstream's resolver says cannot be subscripted (scalars, None,
    /// functions, and unions without a None member); reports it at `at`.
    pub(super) fn not_subscriptable(&mut self, t: &Ty, at: Span) -> bool {
        let bad = match t {
            Ty::Int
            | Ty::IntLit(_)
            | Ty::Float
            | Ty::FloatLit(_)
            | Ty::Bool
            | Ty::BoolLit(_)
            | Ty::None
            | Ty::Unit(_)
            | Ty::Func(_) => true,
            // (an `any` member, kept from an annotation, does not make it one)
            Ty::Union(ts) => !ts.iter().any(|t| matches!(t, Ty::None)),
            _ => false,
        };
        if bad {
            let msg = format!("'{}' object is not subscriptable", self.ty_str(t));
            self.err(ErrKind::Compile, msg, at.shrink_to_lo());
        }
        bad
    }

    /// Checks a lambda body and returns the type of its value, the last statement's (upstream:
    /// an expression, an assignment or an assertion; anything else is a compile error). The
    /// value must fit the declared return type.
    pub(super) fn lambda_body(&mut self, env: &Env, body: &[Stmt], declared: Option<&Ty>) -> Ty {
        self.lambda_depth += 1;
        let t = self.lambda_body_inner(env, body, declared);
        self.lambda_depth -= 1;
        t
    }

    pub(super) fn lambda_body_inner(
        &mut self,
        env: &Env,
        body: &[Stmt],
        declared: Option<&Ty>,
    ) -> Ty {
        let n = body.len();
        // upstream's resolver checks the last statement's kind before the body's names
        if let Some(last) = body.last()
            && !matches!(
                last.kind,
                StmtKind::Expr(_)
                    | StmtKind::Assign(_)
                    | StmtKind::AugAssign(_)
                    | StmtKind::Assert(_)
            )
        {
            self.err(
                ErrKind::Compile,
                "The last statement of the lambda body must be a expression e.g., x, 1, etc."
                    .into(),
                last.span.shrink_to_lo(),
            );
            return Ty::Any;
        }
        // a local takes the type of its first assignment in the body's own statements
        let mut env = env.clone();
        let mut typed: Vec<Symbol> = Vec::new();
        for s in &body[..n.saturating_sub(1)] {
            // a lambda in the value sees the names the statement assigns (itself, to recurse)
            let mark = self.lambda_names.len();
            if let StmtKind::Assign(a) = &s.kind {
                self.lambda_names
                    .extend(a.targets.iter().map(|t| t.name.sym));
            }
            env = assigned_visible(env, s);
            self.lambda_body_stmt(&mut env, &mut typed, s);
            self.lambda_names.truncate(mark);
        }
        if let Some(last) = body.last() {
            env = assigned_visible(env, last);
        }
        self.lambda_body_last(&env, body, declared)
    }

    /// One statement (not the last) of a lambda body: the locals it binds join `env`.
    fn lambda_body_stmt(&mut self, env: &mut Env, typed: &mut Vec<Symbol>, s: &Stmt) {
        if let StmtKind::Assign(a) = &s.kind
            && let [t] = a.targets.as_slice()
            && t.path.is_empty()
        {
            let ty = match &a.ty {
                Some(x) => {
                    self.stmt(env, s);
                    self.resolve_type(env.pkg, env.file, x)
                }
                None => self.infer(env, &a.value).variable_type(),
            };
            if !typed.contains(&t.name.sym) {
                typed.push(t.name.sym);
                *env = env.with_local(t.name.sym, ty);
            }
        } else {
            self.stmt(env, s);
            // upstream's lambda scope has a name once its assignment is reached
            let mut names = Vec::new();
            if !matches!(s.kind, StmtKind::If(_)) {
                collect_assigned(std::slice::from_ref(s), &mut names);
            }
            for n in names {
                if !typed.contains(&n) {
                    typed.push(n);
                    *env = env.with_local(n, Ty::Any);
                }
            }
        }
    }

    /// The last statement of a lambda body: its value's type, checked against `declared`.
    fn lambda_body_last(&mut self, env: &Env, body: &[Stmt], declared: Option<&Ty>) -> Ty {
        let Some(last) = body.last() else {
            return Ty::Any;
        };
        let (got, at) = match &last.kind {
            StmtKind::Expr(x) => {
                if let Some(rt) = declared
                    && matches!(strip_paren(x).kind, ExprKind::Config(_))
                {
                    // a config literal is checked member by member against the declared type
                    // (a whole mismatch noted at the declared type)
                    let def = self.lambda_ret_at.map(|d| d.shrink_to_lo());
                    self.check_value(env, x, rt, x.span, def);
                    return rt.clone();
                }
                (self.infer(env, x), x.span)
            }
            StmtKind::Assign(a) => {
                if a.ty.is_some() {
                    self.stmt(env, last);
                } else {
                    // `a.b = v` wants `a` in scope, as in the body's other statements
                    let before = self.errors.len();
                    for t in a.targets.iter().filter(|t| !t.path.is_empty()) {
                        self.check_defined(env, t.name.sym, t.name.span.shrink_to_lo());
                        if self.errors.len() > before {
                            return Ty::Any;
                        }
                    }
                }
                let t = self.infer(env, &a.value);
                (t, self.stmt_start.unwrap_or(last.span))
            }
            StmtKind::AugAssign(_) | StmtKind::Assert(_) => {
                self.stmt(env, last);
                (Ty::Any, last.span)
            }
            // (reported above)
            _ => return Ty::Any,
        };
        if let Some(rt) = declared
            && !assignable(&got, rt, &|a, b| self.is_sub_schema(a, b))
        {
            let (es, gs) = (self.ty_str(rt), self.ty_str(&got));
            let mut e = EvalError::new(
                ErrKind::Type,
                format!("expected {es}, got {gs}"),
                Some(at.shrink_to_lo()),
            );
            // (noted at the declared return type)
            if let Some(d) = self.lambda_ret_at {
                let note = format!("variable is defined here, its type is {es}, but got {gs}");
                e = e.with_note(d.shrink_to_lo(), note);
            }
            self.errors.push(e);
        }
        got
    }

    pub(super) fn comp_env(&mut self, env: &Env, clauses: &[ast::CompClause]) -> Env {
        let mut env2 = env.clone();
        for c in clauses {
            let it = self.infer(&env2, &c.iter);
            // (after the iterable's own errors, before the number of variables)
            if let Some(t) = c.targets.iter().find(|t| t.names.len() > 1) {
                let msg = "loop variables can only be ordinary identifiers".to_string();
                self.err(ErrKind::Compile, msg, t.span.shrink_to_lo());
            }
            // (after the iterable's own errors) upstream's resolver reports it at the end of
            // the second variable
            if c.targets.len() > 2 {
                let msg = format!(
                    "the number of loop variables is {}, which can only be 1 or 2",
                    c.targets.len()
                );
                self.err(ErrKind::Compile, msg, c.targets[1].span.shrink_to_hi());
            }
            // (a literal None neither)
            let mut scalars = not_iterable_members(&it);
            if scalars.is_empty()
                && matches!(
                    strip_paren(&c.iter).kind,
                    ExprKind::None | ExprKind::Undefined
                )
            {
                scalars.push(it.clone());
            }
            for t in scalars {
                let msg = format!("'{}' object is not iterable", self.ty_str(&t));
                self.err(ErrKind::Compile, msg, c.iter.span.shrink_to_lo());
            }
            let tys = loop_var_types(&it, c.targets.len());
            for (i, t) in c.targets.iter().enumerate() {
                let ty = match (t.names.len(), tys.get(i)) {
                    (1, Some(ty)) => ty.clone(),
                    _ => Ty::Any,
                };
                // (a dotted one, `i.j`, names its first part only, as upstream's resolver)
                if let Some(n) = t.names.first() {
                    env2 = env2.with_loop_var(n.sym, ty);
                }
            }
            for x in &c.ifs {
                self.infer(&env2, x);
            }
        }
        env2
    }
}

/// A number, a bool or a module: upstream's resolver iterates none of them.
fn never_iterable(t: &Ty) -> bool {
    matches!(
        t,
        Ty::Bool
            | Ty::BoolLit(_)
            | Ty::Int
            | Ty::IntLit(_)
            | Ty::Float
            | Ty::FloatLit(_)
            | Ty::Module(_)
    )
}

/// The types a loop over a value of type `t` cannot iterate: `t` itself, or each member of
/// a union that is one (upstream reports each).
fn not_iterable_members(t: &Ty) -> Vec<Ty> {
    match t {
        Ty::Union(ts) => ts.iter().filter(|m| never_iterable(m)).cloned().collect(),
        t if never_iterable(t) => vec![t.clone()],
        _ => Vec::new(),
    }
}

/// The loop variables' types where the iterated value's type is known, as variable types
/// (upstream: `for x in [1]` binds an `int`); over a union, each member's, joined.
pub(super) fn loop_var_types(it: &Ty, n: usize) -> Vec<Ty> {
    if let Ty::Union(ts) = it {
        let per: Vec<Vec<Ty>> = ts
            .iter()
            .map(|m| loop_var_types(m, n))
            .filter(|v| !v.is_empty())
            .collect();
        if per.is_empty() || per.len() < ts.iter().filter(|m| !never_iterable(m)).count() {
            return Vec::new();
        }
        return (0..n)
            .map(|i| Ty::union(per.iter().map(|v| v[i].clone()).collect()))
            .collect();
    }
    match (it, n) {
        (Ty::List(e), 1) => vec![e.variable_type()],
        (Ty::List(e), 2) => vec![Ty::Int, e.variable_type()],
        (Ty::Dict(k, _), 1) => vec![k.variable_type()],
        (Ty::Dict(k, v), 2) => vec![k.variable_type(), v.variable_type()],
        (Ty::Str | Ty::StrLit(_), 1) => vec![Ty::Str],
        (Ty::Str | Ty::StrLit(_), 2) => vec![Ty::Int, Ty::Str],
        _ => Vec::new(),
    }
}

/// A number literal, signed or not (`0`, `-2`): upstream's parser reads the sign into it.
pub(super) fn number_literal(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) => true,
        ExprKind::Unary {
            op: ast::UnaryOp::Neg | ast::UnaryOp::Pos,
            operand,
        } => matches!(operand.kind, ExprKind::Int(_)),
        _ => false,
    }
}

/// The type of the value of `key` read from a dict of type `{k:v}`. Upstream records a config
/// literal's values per key, widened as variables' types (`[{x = False}][0].x` is `bool`);
/// other reads (a dict typed by an annotation, `{str:1}`, or a key the literal lacks) get its
/// value type as it is. A literal key type naming `key` tells the first kind apart.
fn dict_value_read(k: &Ty, v: &Ty, key: Option<&str>) -> Ty {
    let names_key = |t: &Ty| matches!((t, key), (Ty::StrLit(s), Some(key)) if &**s == key);
    let recorded = match k {
        Ty::Union(ts) => ts.iter().any(names_key),
        t => names_key(t),
    };
    if recorded {
        v.variable_type()
    } else {
        v.clone()
    }
}

/// Whether `*` may unpack a value of type `t` in a list (upstream's resolver: a list, a dict,
/// a schema instance, None or any; a union only when each member is).
fn unpackable(t: &Ty) -> bool {
    match t {
        Ty::Any | Ty::None | Ty::List(_) | Ty::Dict(..) | Ty::Schema(_) => true,
        Ty::Union(ts) => ts.iter().all(unpackable),
        _ => false,
    }
}

/// `env` with the names an assignment in a lambda body binds, for its own value: upstream's
/// lambda scope declares them first (`age = age + 1` is no static error there; the value is
/// Undefined when it runs). A name the scope has already keeps its type.
fn assigned_visible(env: Env, s: &Stmt) -> Env {
    let StmtKind::Assign(a) = &s.kind else {
        return env;
    };
    let mut env = env;
    for t in &a.targets {
        if t.path.is_empty() && env.locals.iter().all(|(n, _)| *n != t.name.sym) {
            env = env.with_local(t.name.sym, Ty::Any);
        }
    }
    env
}

/// Where upstream's resolver reports a missing attribute of `value.attr`: a dotted name is one
/// identifier (its start), and so is the chain of names after any other value or after a `?.`
/// (the first name of the chain).
fn attr_error_at(value: &Expr, attr: Span, optional: bool) -> Span {
    if !optional && dotted(value).is_some() {
        return value.span.shrink_to_lo();
    }
    let (mut at, mut cur) = (attr, value);
    if !optional {
        while let ExprKind::Selector(s) = &cur.kind {
            at = s.attr.span;
            if s.optional {
                break;
            }
            cur = &s.value;
        }
    }
    at.shrink_to_lo()
}
