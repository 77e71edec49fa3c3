//! Calls: builtin functions and string methods (their arity, parameter and result types),
//! lambdas and schema arguments.

use super::*;

impl<'a> Checker<'a> {
    /// A call `func(args)`: builtins, methods, lambdas and schemas called as functions.
    pub(super) fn infer_call(
        &mut self,
        env: &Env,
        e: &Expr,
        func: &Expr,
        args: &ast::CallArgs,
    ) -> Ty {
        let mut func_ty = Ty::Any;
        let arity = self.builtin_arity(env, func, &mut func_ty);
        // a builtin called is checked by its own rules below, not as a lambda
        if let ExprKind::Ident(s) = &func.kind
            && BUILTINS.contains(&s.as_str())
            && self.builtin_visible(env, *s)
        {
            func_ty = Ty::Any;
        }
        // a method's receiver, before the arguments are inferred
        // (`s?.upper()` is typed as `s.upper()`)
        let on_str = match &func.kind {
            ExprKind::Selector(x) => {
                matches!(self.receiver_ty(env, &x.value), Ty::Str | Ty::StrLit(_))
            }
            _ => false,
        };
        if arity.is_none()
            && let Ty::Func(f) = &func_ty
        {
            // upstream names the callee by its dotted path; other callees are
            // checked at run time
            return self.lambda_call(env, callee_name(func), f, args, e.span);
        }
        if arity.is_none()
            && let Ty::SchemaType(id) = func_ty
            && self.schema_is_plain(id)
        {
            let f = self.schema_params(id);
            return self.lambda_call(env, dotted(func), &f, args, e.span);
        }
        if arity.is_none()
            && let Some(f) = self.rule_params(env, func)
        {
            return self.lambda_call(env, dotted(func), &f, args, e.span);
        }
        // a value that is no function: upstream's resolver stops there (the arguments are not
        // checked)
        if arity.is_none() {
            let msg = match &func_ty {
                // upstream's resolver marks as instances the values of schema expressions
                // (and lambda parameters); a type written in an annotation is the schema
                // itself, which a call instantiates
                Ty::Schema(id) if !self.known_instance(env, func) => {
                    for a in args.args.iter() {
                        self.infer(env, a);
                    }
                    for k in args.keywords.iter() {
                        self.infer(env, &k.value);
                    }
                    return Ty::Schema(*id);
                }
                Ty::Schema(id) => Some(format!(
                    "schema '{}' instance is not callable",
                    self.schema_name(*id)
                )),
                t if not_callable(t) => {
                    Some(format!("'{}' object is not callable", self.ty_str(t)))
                }
                _ => None,
            };
            if let Some(msg) = msg {
                self.err(ErrKind::Compile, msg, func.span.shrink_to_lo());
                return Ty::Any;
            }
        }
        // a builtin's positional arguments are checked one by one as upstream's resolver
        // reaches them (a wrong first argument is reported before the second is looked at)
        let bparams = match &func.kind {
            ExprKind::Ident(s) if self.builtin_visible(env, *s) => builtin_fn_params(s.as_str()),
            _ => None,
        }
        .filter(|_| {
            !args
                .args
                .iter()
                .any(|a| matches!(a.kind, ExprKind::Starred(_)))
        });
        let mut arg_tys: Vec<Ty> = Vec::with_capacity(args.args.len());
        for (i, a) in args.args.iter().enumerate() {
            let got = self.infer(env, a);
            if let Some((_, want)) = bparams.as_ref().and_then(|ps| ps.get(i))
                && !assignable(&got, want, &|x, y| self.is_sub_schema(x, y))
            {
                let msg = format!("expected {}, got {}", self.ty_str(want), self.ty_str(&got));
                self.err(ErrKind::Type, msg, a.span.shrink_to_lo());
            }
            arg_tys.push(got);
        }
        // a string method's keyword arguments: upstream's resolver reports an unknown name
        // without looking at its value, and never looks at the values `format` takes
        let str_method = match &func.kind {
            ExprKind::Selector(x) if on_str => Some(x.attr.sym.as_str()),
            _ => None,
        };
        // a builtin function's keyword arguments likewise: a name it does not take is
        // reported without its value, and the variadic ones (`print`, `max`, ...) take any
        let builtin_params = match &func.kind {
            ExprKind::Ident(s)
                if BUILTINS.contains(&s.as_str()) && self.builtin_visible(env, *s) =>
            {
                Some(builtin_fn_params(s.as_str()))
            }
            _ => None,
        };
        // a callee of unknown type: upstream's resolver checks it as a variadic function,
        // whose keyword values it never looks at (an undefined name there is Undefined at
        // run time)
        let unknown_callee = matches!(func_ty, Ty::Any)
            && arity.is_none()
            && str_method.is_none()
            && builtin_params.is_none();
        let kw_tys: Vec<Ty> = args
            .keywords
            .iter()
            .map(|k| match str_method {
                _ if unknown_callee => Ty::Any,
                _ if matches!(&builtin_params, Some(ps) if !ps.as_ref().is_some_and(|ps| ps.iter().any(|(p, _)| *p == k.name.sym.as_str()))) => {
                    Ty::Any
                }
                Some("format") => Ty::Any,
                Some(m)
                    if !str_method_params(m)
                        .unwrap_or_default()
                        .iter()
                        .any(|(p, _)| *p == k.name.sym.as_str()) =>
                {
                    Ty::Any
                }
                _ => self.infer(env, &k.value),
            })
            .collect();
        let mut keywords_checked = false;
        if let ExprKind::Ident(s) = &func.kind
            && let Some(params) = builtin_fn_params(s.as_str())
            && self.builtin_visible(env, *s)
        {
            // (positional arguments were checked above)
            self.builtin_args(s.as_str(), &params, args, &[], &kw_tys);
            keywords_checked = true;
        }
        if let Some(m) = str_method
            && m != "format"
            && (!args.keywords.is_empty() || str_method_params(m).is_some())
        {
            let params = str_method_params(m).unwrap_or_default();
            self.builtin_args(m, &params, args, &arg_tys, &kw_tys);
            keywords_checked = true;
        }
        // any other call (a callee of unknown type, `print`, `format`): a keyword given
        // twice is still upstream's error
        if !keywords_checked {
            // (a method of a value that has no dotted name is named by its attribute)
            let name = match (str_method, &func.kind) {
                (Some(m), _) => Some(m.to_string()),
                (None, ExprKind::Selector(x)) => {
                    dotted(func).or_else(|| Some(x.attr.sym.as_str().to_string()))
                }
                (None, _) => dotted(func),
            };
            for i in 0..args.keywords.len() {
                self.duplicate_keyword(name.as_deref(), args, i);
            }
        }
        let builtin = arity.is_some();
        if let Some((name, min, max)) = arity {
            if args.keywords.is_empty() {
                self.check_arity(&name, min, max, &args.args, e.span);
            } else {
                // with keywords, upstream counts those naming a required parameter too
                let params = match (&func.kind, str_method) {
                    (_, Some(m)) => str_method_params(m),
                    (ExprKind::Ident(s), None) => builtin_fn_params(s.as_str()),
                    _ => None,
                };
                if let Some(params) = params {
                    let named = args
                        .keywords
                        .iter()
                        .filter(|k| {
                            params[..min.min(params.len())]
                                .iter()
                                .any(|(p, _)| *p == k.name.sym.as_str())
                        })
                        .count();
                    let given = args.args.len() + named;
                    if given < min {
                        let msg = format!(
                            "expected {min} positional {}, found {given}",
                            if min > 1 { "arguments" } else { "argument" }
                        );
                        self.err(ErrKind::Compile, msg, e.span);
                    }
                }
                // too many positional arguments, whatever the keywords
                if let Some(max) = max
                    && args.args.len() > max
                {
                    self.check_arity(&name, 0, Some(max), &args.args, e.span);
                }
            }
        }
        // what upstream's resolver knows builtins and string methods return
        match &func.kind {
            ExprKind::Ident(s) if builtin || self.builtin_visible(env, *s) => {
                if let Some(t) = builtin_fn_ret(s.as_str()) {
                    return t;
                }
            }
            ExprKind::Selector(x) => {
                if on_str && let Some(t) = str_method_ret(x.attr.sym.as_str()) {
                    return t;
                }
            }
            _ => {}
        }
        match func_ty {
            Ty::Func(f) => f.ret.clone(),
            _ => Ty::Any,
        }
    }

    /// Schemas whose instances the checker understands fully (no protocol/mixin host magic).
    /// The positional arity (name as upstream prints it, required, most) of a call to a
    /// builtin function or to a method of a value known to be a string; infers `func` on the way.
    pub(super) fn builtin_arity(
        &mut self,
        env: &Env,
        func: &Expr,
        func_ty: &mut Ty,
    ) -> Option<(String, usize, Option<usize>)> {
        match &func.kind {
            ExprKind::Ident(s) => {
                let shadowed = !self.builtin_visible(env, *s);
                *func_ty = self.infer(env, func);
                let (min, max) = builtin_fn_arity(s.as_str()).filter(|_| !shadowed)?;
                Some((s.as_str().to_string(), min, max))
            }
            ExprKind::Selector(x) if !x.optional => {
                *func_ty = self.infer(env, func);
                // the receiver's type, where it is known without inferring it again
                let t = self.receiver_ty(env, &x.value);
                if !matches!(t, Ty::Str | Ty::StrLit(_)) {
                    return None;
                }
                let (min, max) = str_method_arity(x.attr.sym.as_str())?;
                // upstream names the call by its dotted path, or the method alone
                let name = match dotted(func) {
                    Some(d) => d,
                    None => x.attr.sym.as_str().to_string(),
                };
                Some((name, min, max))
            }
            _ => {
                *func_ty = self.infer(env, func);
                None
            }
        }
    }

    /// Whether `s` names the builtin function there (no local, member or global of the name).
    pub(super) fn builtin_visible(&mut self, env: &Env, s: Symbol) -> bool {
        !(env.locals.iter().any(|(n, _)| *n == s)
            || self.is_schema_member(env, s)
            || self.pkgs[env.pkg].defined.contains(&s)
            || self.imports.contains_key(&(env.file, s)))
    }

    /// A call of a lambda whose parameters are known: upstream's static checks of argument
    /// counts, keyword names and argument types; the value has the lambda's return type.
    pub(super) fn lambda_call(
        &mut self,
        env: &Env,
        name: Option<String>,
        f: &ty::FuncTy,
        args: &ast::CallArgs,
        at: Span,
    ) -> Ty {
        let def = |i: usize| f.param_spans.get(i).copied();
        for (i, a) in args.args.iter().enumerate() {
            match f.params.get(i) {
                Some((_, t, _)) => self.check_arg(env, a, t, def(i)),
                None => {
                    self.infer(env, a);
                    // (once, at the first argument too many)
                    if i == f.params.len() {
                        let n = f.params.len();
                        let callee = match &name {
                            Some(name) => format!("\"{name}\""),
                            None => "anonymous function".to_string(),
                        };
                        let msg = format!(
                            "{callee} takes {n} positional {} but {} were given",
                            if n > 1 { "arguments" } else { "argument" },
                            args.args.len()
                        );
                        self.err(ErrKind::Compile, msg, a.span.shrink_to_lo());
                    }
                }
            }
        }
        for (i, k) in args.keywords.iter().enumerate() {
            self.duplicate_keyword(name.as_deref(), args, i);
            match f.params.iter().position(|(p, _, _)| *p == Some(k.name.sym)) {
                Some(i) => {
                    let t = &f.params[i].1;
                    self.check_arg(env, &k.value, t, def(i))
                }
                // (upstream does not look at the value of a keyword the callee lacks)
                None => {
                    if let Some(name) = &name {
                        let names = f
                            .params
                            .iter()
                            .filter_map(|(p, _, _)| p.map(|p| p.as_str()));
                        let msg = format!(
                            "\"{name}\" got an unexpected keyword argument '{}'{}",
                            k.name.sym,
                            did_you_mean_or(k.name.sym.as_str(), names)
                        );
                        self.err(ErrKind::Compile, msg, k.name.span.shrink_to_lo());
                    }
                }
            }
        }
        // upstream counts the positional arguments and the keywords naming a parameter
        // without a default
        let required = f.params.iter().filter(|(_, _, d)| !d).count();
        let named_required = f
            .params
            .iter()
            .filter(|(p, _, d)| !d && args.keywords.iter().any(|k| *p == Some(k.name.sym)))
            .count();
        let given = args.args.len() + named_required;
        if given < required {
            let msg = format!(
                "expected {required} positional {}, found {given}",
                if required > 1 {
                    "arguments"
                } else {
                    "argument"
                }
            );
            self.err(ErrKind::Compile, msg, at.shrink_to_lo());
        }
        f.ret.clone()
    }

    /// An argument against its parameter's type (declared at `def`). A config literal for a
    /// dict parameter is upstream's two checks: its entries, noted at the argument, then the
    /// whole literal, noted at the parameter.
    fn check_arg(&mut self, env: &Env, a: &Expr, t: &Ty, def: Option<Span>) {
        if let (ExprKind::Config(entries), Ty::Dict(kt, vt)) = (&strip_paren(a).kind, t) {
            self.check_dict_literal(env, a, entries, (t, kt, vt), a.span, (Some(a.span), def));
        } else {
            self.check_value(env, a, t, a.span, def);
        }
        // then the argument's type at it (a dict literal meeting a schema by its attributes)
        let before = self.errors.len();
        self.check_parts(env, a, t, a.span);
        self.drop_repeated_errors(before);
    }

    /// Upstream's static checks of a builtin's argument types and keyword names. A value of
    /// unknown type (`any`, None) passes, as upstream's; a schema instance is not a dict here
    /// (`len(instance)` is a type error upstream).
    pub(super) fn builtin_args(
        &mut self,
        name: &str,
        params: &[(&str, Ty)],
        args: &ast::CallArgs,
        arg_tys: &[Ty],
        kw_tys: &[Ty],
    ) {
        if args
            .args
            .iter()
            .any(|a| matches!(a.kind, ExprKind::Starred(_)))
        {
            return;
        }
        let fits = |got: &Ty, want: &Ty, this: &Self| {
            assignable(got, want, &|a, b| this.is_sub_schema(a, b))
        };
        // (no argument types: the caller checked the positional arguments)
        for ((a, got), (_, want)) in args.args.iter().zip(arg_tys).zip(params) {
            if !fits(got, want, self) {
                let msg = format!("expected {}, got {}", self.ty_str(want), self.ty_str(got));
                self.err(ErrKind::Type, msg, a.span.shrink_to_lo());
            }
        }
        // `dict(k = v)`: its keywords are entries, any name
        if name == "dict" {
            return;
        }
        for (i, (k, got)) in args.keywords.iter().zip(kw_tys).enumerate() {
            self.duplicate_keyword(Some(name), args, i);
            match params.iter().find(|(p, _)| *p == k.name.sym.as_str()) {
                Some((_, want)) => {
                    if !fits(got, want, self) {
                        let msg =
                            format!("expected {}, got {}", self.ty_str(want), self.ty_str(got));
                        self.err(ErrKind::Type, msg, k.value.span.shrink_to_lo());
                    }
                }
                None => {
                    let msg = format!(
                        "\"{name}\" got an unexpected keyword argument '{}'{}",
                        k.name.sym,
                        did_you_mean_or(k.name.sym.as_str(), params.iter().map(|(p, _)| *p))
                    );
                    self.err(ErrKind::Compile, msg, k.name.span.shrink_to_lo());
                }
            }
        }
    }

    /// Upstream's check of keyword `i` of a call: given before in the same call, it is
    /// reported after the value of the keyword before it, the callee named as written
    /// (`anonymous function` when it has no name).
    pub(super) fn duplicate_keyword(&mut self, name: Option<&str>, args: &ast::CallArgs, i: usize) {
        let k = &args.keywords[i];
        if i == 0 || !args.keywords[..i].iter().any(|p| p.name.sym == k.name.sym) {
            return;
        }
        let callee = match name {
            Some(n) => format!("\"{n}\""),
            None => "anonymous function".to_string(),
        };
        let msg = format!("{callee} has duplicated keyword argument {}", k.name.sym);
        let prev = args.keywords[i - 1].value.span;
        self.err(ErrKind::Compile, msg, prev.shrink_to_hi());
    }

    /// Upstream's static argument-count errors: too few at the call, too many at the first
    /// argument beyond the last parameter.
    pub(super) fn check_arity(
        &mut self,
        name: &str,
        min: usize,
        max: Option<usize>,
        args: &[Expr],
        at: Span,
    ) {
        let plural = |n: usize| if n > 1 { "arguments" } else { "argument" };
        if args.len() < min {
            let msg = format!(
                "expected {min} positional {}, found {}",
                plural(min),
                args.len()
            );
            self.err(ErrKind::Compile, msg, at);
        } else if let Some(max) = max
            && args.len() > max
        {
            let msg = format!(
                "\"{name}\" takes {max} positional {} but {} were given",
                plural(max),
                args.len()
            );
            self.err(ErrKind::Compile, msg, args[max].span);
        }
    }
}

/// Positional arity (required, most) of upstream's builtin functions, where measured against
/// it (`None`: not bounded here, because upstream checks argument types first).
pub(super) fn builtin_fn_arity(name: &str) -> Option<(usize, Option<usize>)> {
    Some(match name {
        "len" | "abs" | "float" | "hex" | "bin" | "oct" | "ord" | "isunique" | "all_true"
        | "any_true" => (1, Some(1)),
        "int" | "round" | "sorted" | "typeof" | "sum" => (1, Some(2)),
        "str" | "list" | "bool" => (0, Some(1)),
        "pow" | "reduce" => (2, Some(3)),
        "range" => (0, Some(3)),
        "multiplyof" => (2, Some(2)),
        "option" => (1, Some(5)),
        _ => return None,
    })
}

/// The parameters (name, type) of upstream's builtin functions with a fixed parameter list, as
/// its resolver declares them (`print`, `max`, `min` and `zip` are variadic: unchecked).
pub(super) fn builtin_fn_params(name: &str) -> Option<Vec<(&'static str, Ty)>> {
    let sig: &[(&str, &str)] = match name {
        "option" => &[
            ("key", "str"),
            ("type", "str"),
            ("required", "bool"),
            ("default", "any"),
            ("help", "str"),
        ],
        "multiplyof" => &[("a", "int"), ("b", "int")],
        "isunique" | "all_true" | "any_true" => &[("inval", "[any]")],
        "len" => &[("inval", "str | {any:any} | [any]")],
        "abs" => &[("inval", "any")],
        "hex" | "bin" | "oct" => &[("number", "int")],
        "ord" => &[("c", "str")],
        "sorted" => &[("inval", "str | {any:any} | [any]"), ("reverse", "bool")],
        "range" => &[("start", "int"), ("stop", "int"), ("step", "int")],
        "sum" => &[("iterable", "[any]"), ("start", "any")],
        "pow" => &[("x", "num"), ("y", "num"), ("z", "num")],
        "reduce" => &[
            ("function", "(any, any) -> any"),
            ("iterable", "[any]"),
            ("initial", "any"),
        ],
        "round" => &[("number", "num"), ("ndigits", "int")],
        "int" => &[("number", "any"), ("base", "int")],
        "float" => &[("number", "any")],
        "bool" | "str" | "list" | "dict" => &[("x", "any")],
        "typeof" => &[("x", "any"), ("full_name", "bool")],
        _ => return None,
    };
    Some(
        sig.iter()
            .map(|(n, t)| (*n, sysmod::parse_ty(&t.replace(' ', ""))))
            .collect(),
    )
}

/// Positional arity (required, most) of upstream's string methods.
pub(super) fn str_method_arity(name: &str) -> Option<(usize, Option<usize>)> {
    Some(match name {
        "upper" | "lower" | "capitalize" | "title" | "isalnum" | "isalpha" | "isdigit"
        | "islower" | "isupper" | "isspace" | "istitle" | "chars" => (0, Some(0)),
        "count" | "endswith" | "startswith" | "find" | "index" | "rfind" | "rindex" => (1, Some(3)),
        "join" | "removeprefix" | "removesuffix" => (1, Some(1)),
        "strip" | "lstrip" | "rstrip" | "splitlines" => (0, Some(1)),
        "split" | "rsplit" => (0, Some(2)),
        "replace" => (2, Some(3)),
        _ => return None,
    })
}

/// Upstream's parameter types of the string methods that take arguments (checked positionally).
pub(super) fn str_method_params(name: &str) -> Option<Vec<(&'static str, Ty)>> {
    let s = || Ty::Str;
    let i = || Ty::Int;
    Some(match name {
        "count" | "find" | "index" | "rfind" | "rindex" => {
            vec![("sub", s()), ("start", i()), ("end", i())]
        }
        "endswith" | "startswith" => vec![("val", s()), ("start", i()), ("end", i())],
        "removeprefix" => vec![("prefix", s())],
        "removesuffix" => vec![("suffix", s())],
        "strip" | "lstrip" | "rstrip" => vec![("chars", s())],
        "splitlines" => vec![("keepends", Ty::Bool)],
        "split" | "rsplit" => vec![("sep", s()), ("maxsplit", i())],
        "replace" => vec![("old", s()), ("new", s()), ("count", i())],
        "join" => vec![("iter", Ty::List(Rc::new(Ty::Any)))],
        _ => return None,
    })
}

/// Whether every value of a config literal (through `**` of literals and `if` entries) is a
/// schema expression.
fn values_are_instances(entries: &[ast::ConfigEntry]) -> bool {
    !entries.is_empty()
        && entries.iter().all(|en| match &en.kind {
            ast::ConfigEntryKind::KeyValue { value, .. } => {
                matches!(strip_paren(value).kind, ExprKind::Schema(_))
            }
            ast::ConfigEntryKind::Unpack { value, .. } => match &strip_paren(value).kind {
                ExprKind::Config(inner) => values_are_instances(inner),
                _ => false,
            },
            ast::ConfigEntryKind::If(ci) => {
                values_are_instances(&ci.body)
                    && (ci.orelse.is_empty() || values_are_instances(&ci.orelse))
            }
        })
}

/// The type a builtin function's call has (where it does not depend on the arguments).
pub(super) fn builtin_fn_ret(name: &str) -> Option<Ty> {
    Some(match name {
        "len" | "int" | "ord" => Ty::Int,
        "float" => Ty::Float,
        "str" | "hex" | "bin" | "oct" | "typeof" => Ty::Str,
        "isunique" | "all_true" | "any_true" | "multiplyof" | "bool" => Ty::Bool,
        "round" | "pow" => Ty::union(vec![Ty::Int, Ty::Float]),
        "range" => Ty::List(Rc::new(Ty::Int)),
        "sorted" | "zip" | "list" => Ty::List(Rc::new(Ty::Any)),
        "dict" => Ty::Dict(Rc::new(Ty::Any), Rc::new(Ty::Any)),
        _ => return None,
    })
}

/// The type a string method's call has.
pub(super) fn str_method_ret(name: &str) -> Option<Ty> {
    Some(match name {
        "upper" | "lower" | "capitalize" | "title" | "format" | "join" | "removeprefix"
        | "removesuffix" | "strip" | "lstrip" | "rstrip" | "replace" => Ty::Str,
        "isalnum" | "isalpha" | "isdigit" | "islower" | "isupper" | "isspace" | "istitle"
        | "endswith" | "startswith" => Ty::Bool,
        "count" | "find" | "index" | "rfind" | "rindex" => Ty::Int,
        "split" | "rsplit" | "splitlines" => Ty::List(Rc::new(Ty::Str)),
        _ => return None,
    })
}

impl Checker<'_> {
    /// Whether upstream's resolver knows `e` as a schema instance: a local (a lambda parameter
    /// or loop variable) or a package-level name holding a schema expression's value.
    pub(super) fn known_instance(&mut self, env: &Env, e: &Expr) -> bool {
        // a value of a config literal (`{a = S {}}.a`, or through `.values`/`.get`)
        // (upstream's resolver knows the values of schema expressions as instances; a value
        // typed by an annotation is the schema itself)
        if let ExprKind::Selector(x) = &strip_paren(e).kind {
            // (a filter over the literal keeps its values)
            let mut recv = strip_paren(&x.value);
            while let ExprKind::Quant(q) = &recv.kind
                && q.op == ast::QuantOp::Filter
            {
                recv = strip_paren(&q.target);
            }
            if let ExprKind::Config(entries) = &recv.kind {
                return values_are_instances(entries);
            }
            if let ExprKind::DictComp(c) = &recv.kind {
                return matches!(strip_paren(&c.value).kind, ExprKind::Schema(_));
            }
            // a package-level name holding such a literal
            if let Some(entries) = self.variable_config(env, recv) {
                return values_are_instances(entries);
            }
        }
        let ExprKind::Ident(s) = &strip_paren(e).kind else {
            return false;
        };
        // a schema's parameter is typed by its annotation (no instance); a lambda's is one
        let bindings = env.locals.iter().filter(|(n, _)| n == s).count();
        if bindings == 1
            && let Some(id) = env.schema
            && self.schemas[id.0]
                .stmt
                .params
                .iter()
                .flatten()
                .any(|p| p.name.sym == *s)
        {
            return false;
        }
        if bindings > 0 {
            return true;
        }
        if env.keys.iter().any(|(k, _, _)| k == s) || self.is_schema_member(env, *s) {
            return false;
        }
        matches!(
            self.pkgs[env.pkg].inferred.get(s),
            Some(&(x, _)) if matches!(strip_paren(x).kind, ExprKind::Schema(_))
        )
    }
}

/// A type whose values can never be called (`None` and `any` may stand for anything).
/// How upstream names a called function in its messages: its dotted path, else the attribute
/// a selector reads (`{g = f}.g(1)`: "g"); `None` for an anonymous callee.
fn callee_name(func: &Expr) -> Option<String> {
    dotted(func).or_else(|| match &func.kind {
        ExprKind::Selector(x) if !x.optional => Some(x.attr.sym.as_str().to_string()),
        _ => None,
    })
}

fn not_callable(t: &Ty) -> bool {
    match t {
        _ if t.is_scalar() => true,
        Ty::None | Ty::List(_) | Ty::Dict(..) | Ty::Module(_) => true,
        Ty::Union(ts) => ts.iter().all(not_callable),
        _ => false,
    }
}
