//! The type of a config literal: its entries' keys and values (through `**` and `if` entries),
//! the scope its entries see, and the config literals an operand expression holds; which keys
//! a config may have (a loop variable's value, an index signature's string literals) and
//! upstream's "Cannot add member" for one it may not.

use super::fit::schema_ids;
use super::infer::number_literal;
use super::*;

impl<'a> Checker<'a> {
    /// A config entry keyed by a loop variable (`{k = v}` in `for k in ...`) that may not be a
    /// string: upstream's resolver refuses the key and types the value on its own (true). A
    /// string one is read as the name it is written as, as upstream's resolver does (false).
    pub(super) fn loop_var_key(
        &mut self,
        env: &Env,
        key: &Expr,
        op: ast::ConfigOp,
        value: &Expr,
    ) -> bool {
        let ExprKind::Ident(s) = &key.kind else {
            return false;
        };
        let Some(t) = env.loop_var_ty(*s) else {
            return false;
        };
        if self.check_str_key(&t, key.span, true) {
            return false;
        }
        let vt = self.infer(env, value);
        self.check_insert(op, &vt, value.span);
        true
    }

    /// The keys a schema's index signature takes when its key type lists string literals
    /// (its own or its nearest base's signature); `None` when it takes any string (or any
    /// other key: `...`).
    pub(super) fn sig_literal_keys(&mut self, id: SchemaId) -> Option<Vec<std::sync::Arc<str>>> {
        let chain: Vec<SchemaId> = std::iter::once(id)
            .chain(self.members(id).parents.iter().copied())
            .collect();
        let info = chain
            .iter()
            .map(|i| &self.schemas[i.0])
            .find(|info| info.stmt.index_signature.is_some())?;
        let (sig, pkg, file) = (info.stmt.index_signature.as_ref()?, info.pkg, info.file);
        // (`[k: ...K]` takes any other key, whatever its key type)
        if sig.any_other {
            return None;
        }
        let lit = |t: &Ty| match t {
            Ty::StrLit(k) => Some(k.clone()),
            _ => None,
        };
        match self.resolve_type(pkg, file, &sig.key_ty) {
            Ty::Union(ts) => ts.iter().map(lit).collect(),
            t => Some(vec![lit(&t)?]),
        }
    }

    /// Whether the schema's index signature takes the key `name` (upstream's resolver refuses
    /// a key outside a key type of string literals; its run time takes any).
    pub(super) fn sig_takes_key(&mut self, id: SchemaId, name: Symbol) -> bool {
        self.sig_literal_keys(id)
            .is_none_or(|ks| ks.iter().any(|k| **k == *name.as_str()))
    }

    pub(super) fn cannot_add(&mut self, ids: &[SchemaId], name: &Symbol) -> String {
        if let ([id], true) = (ids, self.mixed_union) {
            return format!(
                "Cannot add member '{}' to 'schema {}'",
                name.as_str(),
                self.schema_name(*id)
            );
        }
        if ids.len() > 1 {
            let names: Vec<&str> = ids.iter().map(|i| self.schema_name(*i)).collect();
            // (the suggestions: every member schema's own attributes)
            let own: Vec<Symbol> = ids
                .iter()
                .flat_map(|i| self.schemas[i.0].stmt.body.iter())
                .filter_map(|s| match &s.kind {
                    StmtKind::SchemaAttr(a) => Some(a.name.sym),
                    _ => None,
                })
                .collect();
            return format!(
                "Cannot add member '{}' to 'schemas {:?}'{}",
                name.as_str(),
                names,
                did_you_mean(name.as_str(), own.iter().map(|s| s.as_str()))
            );
        }
        let sname = self.schema_name(ids[0]);
        // an index signature's string literals are the candidates (upstream suggests as the
        // `suggestions` crate does: `bar` for `baz`, nothing for `barx`); a base's signature
        // gives none
        let own_sig = self.schemas[ids[0].0].stmt.index_signature.is_some();
        if let Some(keys) = own_sig.then(|| self.sig_literal_keys(ids[0])).flatten() {
            let sugg = suggestions::provide_suggestions(name.as_str(), keys.iter().map(|k| &**k));
            return match sugg.is_empty() {
                true => format!("Cannot add member '{}' to schema '{sname}'", name.as_str()),
                false => format!(
                    "Cannot add member '{}' to schema '{sname}', did you mean '{sugg:?}'?",
                    name.as_str()
                ),
            };
        }
        let m = self.members(ids[0]);
        // upstream offers the schema's own attributes only, not inherited ones
        let own: Vec<Symbol> = self.schemas[ids[0].0]
            .stmt
            .body
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::SchemaAttr(a) => Some(a.name.sym),
                _ => None,
            })
            .collect();
        format!(
            "Cannot add member '{}' to schema '{sname}'{}",
            name.as_str(),
            did_you_mean(
                name.as_str(),
                m.order
                    .iter()
                    .filter(|s| own.contains(s))
                    .map(|s| s.as_str())
            )
        )
    }

    pub(super) fn infer_config(&mut self, env: &Env, entries: &[ast::ConfigEntry]) -> Ty {
        let env = &self.config_env(env, entries);
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        let known = self.config_entry_types(env, entries, &mut ks, &mut vs);
        if !known {
            return Ty::Any;
        }
        // (upstream's dict type keeps an `any` key or value: `{x = v}` with `v` of unknown
        // type is `{str(x):any}`, `{**d}` with `d` unknown `{any:any}`)
        let sub = |x, y| self.is_sub_schema(x, y);
        let kt = if ks.is_empty() {
            Ty::Any
        } else {
            sup(ks, &sub)
        };
        let vt = if vs.is_empty() {
            Ty::Any
        } else {
            sup(vs, &sub)
        };
        Ty::Dict(Rc::new(kt), Rc::new(vt))
    }

    /// The key and value types of config entries (an `if` entry's branches bring theirs, as
    /// upstream's resolver types them); `false` when some are unknown.
    fn config_entry_types(
        &mut self,
        env: &Env,
        entries: &[ast::ConfigEntry],
        ks: &mut Vec<Ty>,
        vs: &mut Vec<Ty>,
    ) -> bool {
        let mut known = true;
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, value, op } => {
                    // `a.b.c = v` is `a: {b: {c = v}}` to upstream
                    let path = key.name_path();
                    let kt = match &key.kind {
                        // a loop variable as a key is its value
                        ExprKind::Ident(s) if let Some(t) = env.loop_var_ty(*s) => {
                            self.check_str_key(&t, key.span, true);
                            t
                        }
                        ExprKind::Ident(s) => Ty::StrLit(std::sync::Arc::from(s.as_str())),
                        ExprKind::Str(s) => Ty::StrLit(s.clone()),
                        ExprKind::Selector(_) if path.is_some() => {
                            let names = path.as_deref().unwrap_or_default();
                            Ty::StrLit(std::sync::Arc::from(names[0].0.as_str()))
                        }
                        // (`d?.k`, `d["k"].v`: no key path, an expression)
                        _ => {
                            let t = self.infer_config_key(env, key);
                            self.check_str_key(&t, key.span, false);
                            t
                        }
                    };
                    let mut vt = self.infer(env, value);
                    self.check_insert(*op, &vt, value.span);
                    // `name[0] = v` / `name[0]: v` sets an item: upstream types the entry as
                    // a list of the value
                    if *op != ast::ConfigOp::Insert
                        && matches!(&key.kind, ExprKind::Subscript { value: n, index, .. }
                            if n.name_path().is_some() && number_literal(index))
                        && !vt.is_any()
                    {
                        vt = Ty::List(Rc::new(vt));
                    }
                    if let Some(names) = &path {
                        for n in names[1..].iter().rev() {
                            let k = Ty::StrLit(std::sync::Arc::from(n.0.as_str()));
                            vt = Ty::Dict(Rc::new(k), Rc::new(vt));
                        }
                    }
                    if kt.is_any() {
                        known = false;
                    }
                    ks.push(kt);
                    vs.push(vt);
                }
                // `**d` brings the unpacked dict's key and value types
                ast::ConfigEntryKind::Unpack { value: v, .. } => {
                    match self.infer_unpacked(env, v) {
                        Ty::Dict(kt, vt) => {
                            ks.push((*kt).clone());
                            vs.push((*vt).clone());
                        }
                        // (a value of unknown type brings an unknown value type)
                        Ty::Any => vs.push(Ty::Any),
                        // (`**None` brings upstream's `{any:NoneType}`)
                        Ty::None if matches!(strip_paren(v).kind, ExprKind::None) => {
                            ks.push(Ty::Any);
                            vs.push(Ty::None);
                        }
                        // (an instance brings upstream's `{str:any}`)
                        Ty::Schema(_) => {
                            ks.push(Ty::Str);
                            vs.push(Ty::Any);
                        }
                        // (a value that cannot be unpacked, reported, brings nothing)
                        Ty::None | Ty::SchemaType(_) | Ty::Union(_) => known = false,
                        _ => {}
                    }
                }
                ast::ConfigEntryKind::If(ci) => {
                    self.infer(env, &ci.cond);
                    // (each branch's keys are names in that branch, after their entry)
                    let benv = self.config_env(env, &ci.body);
                    let body = self.config_entry_types(&benv, &ci.body, ks, vs);
                    let oenv = self.config_env(env, &ci.orelse);
                    let orelse = self.config_entry_types(&oenv, &ci.orelse, ks, vs);
                    known &= body && orelse;
                }
            }
        }
        known
    }

    /// The value of a `**v` entry: upstream's resolver takes only a dict, a schema instance,
    /// None or a value of unknown type.
    pub(super) fn infer_unpacked(&mut self, env: &Env, v: &Expr) -> Ty {
        let t = self.infer(env, v);
        let ok = |t: &Ty| {
            matches!(
                t,
                Ty::Any | Ty::None | Ty::Dict(..) | Ty::Schema(_) | Ty::SchemaType(_)
            )
        };
        let fits = match &t {
            // (an `any` member, kept from an annotation, is not one of them)
            Ty::Union(ts) => ts.iter().all(|t| !matches!(t, Ty::Any) && ok(t)),
            t => ok(t),
        };
        if !fits {
            let msg = format!(
                "only dict and schema can be used ** unpack, got '{}'",
                self.ty_str(&t)
            );
            self.err(ErrKind::Compile, msg, v.span.shrink_to_lo());
        }
        t
    }

    /// A config entry's key written as an expression. `name[0] = v` sets an item of the list
    /// `name`: upstream's resolver looks at neither the name nor the index (a `str` key); with
    /// another index the key is an expression like any other.
    pub(super) fn infer_config_key(&mut self, env: &Env, key: &Expr) -> Ty {
        match &key.kind {
            ExprKind::Subscript { value, index, .. }
                if value.name_path().is_some() && number_literal(index) =>
            {
                Ty::Str
            }
            _ => self.infer(env, key),
        }
    }

    /// The keys of a config literal are names in its values (and in nested configs), as
    /// upstream resolves `{name = "a", b = name}`.
    pub(super) fn config_env(&mut self, env: &Env, entries: &[ast::ConfigEntry]) -> Env {
        let mut keys = Vec::new();
        collect_keys(entries, &mut keys);
        if keys.is_empty() {
            return env.clone();
        }
        self.key_want.extend(
            keys.iter()
                .filter_map(|(_, _, v)| v.as_ref().map(|v| v.value)),
        );
        let l = if env.keys.is_empty() {
            keys
        } else {
            let mut l = (*env.keys).clone();
            l.extend(keys);
            l
        };
        Env {
            keys: Rc::new(l),
            ..env.clone()
        }
    }
}

/// The keys of a config literal, through `**` of literals and `if` entries (upstream's type
/// of the literal records them all); false when one is not known.
pub(super) fn literal_keys(entries: &[ast::ConfigEntry], keys: &mut Vec<String>) -> bool {
    for en in entries.iter() {
        match &en.kind {
            ast::ConfigEntryKind::KeyValue { key: k, .. } => match &k.kind {
                ExprKind::Ident(n) => keys.push(n.as_str().to_string()),
                ExprKind::Str(v) => keys.push(v.to_string()),
                _ => return false,
            },
            ast::ConfigEntryKind::Unpack { value, .. } => match &strip_paren(value).kind {
                ExprKind::Config(inner) => {
                    if !literal_keys(inner, keys) {
                        return false;
                    }
                }
                _ => return false,
            },
            ast::ConfigEntryKind::If(ci) => {
                if !literal_keys(&ci.body, keys) || !literal_keys(&ci.orelse, keys) {
                    return false;
                }
            }
        }
    }
    true
}

/// The names of a dotted key `a.b.c` (a selector chain on a name), `None` for anything else.
impl<'a> Checker<'a> {
    /// Config literals among the operands of `e` (through parentheses, `as`, operators,
    /// conditionals, quantifier targets and a call of unknown type) read against `want`, as
    /// upstream's config context reaches them.
    pub(super) fn check_operand_configs(
        &mut self,
        env: &Env,
        e: &Expr,
        want: &Ty,
        def: Option<Span>,
    ) {
        match &e.kind {
            ExprKind::Config(entries) => match (schema_ids(want), want) {
                (Some((schemas, mixed)), _) => {
                    self.mixed_union = mixed;
                    self.check_schema_config(env, entries, &schemas);
                    self.mixed_union = false;
                }
                (None, Ty::List(et)) => self.check_dict_config(env, entries, want, et, def),
                (None, Ty::Dict(_, vt)) => self.check_dict_config(env, entries, want, vt, def),
                _ => {}
            },
            // a list literal among the operands, where a list is expected: its items against
            // the item type (upstream's config context steps into list literals)
            ExprKind::List(items) if let Ty::List(et) = want => {
                for it in items.iter() {
                    self.check_operand_configs(env, it, et, def);
                }
            }
            ExprKind::Quant(q) => self.check_operand_configs(env, &q.target, want, def),
            ExprKind::Paren(x)
            | ExprKind::Unary { operand: x, .. }
            | ExprKind::As { value: x, .. } => self.check_operand_configs(env, x, want, def),
            ExprKind::Binary { left, right, .. } => {
                self.check_operand_configs(env, left, want, def);
                self.check_operand_configs(env, right, want, def);
            }
            ExprKind::Compare(c) => {
                self.check_operand_configs(env, &c.left, want, def);
                for (_, r) in c.ops.iter() {
                    self.check_operand_configs(env, r, want, def);
                }
            }
            // a config literal subscripted or selected from (`{x = {y = 1}}["x"]`): upstream's
            // config context reaches it with the type wanted of the whole
            ExprKind::Subscript { value: x, .. } => self.check_operand_configs(env, x, want, def),
            ExprKind::Selector(s) => self.check_operand_configs(env, &s.value, want, def),
            ExprKind::If(x) => {
                self.check_operand_configs(env, &x.cond, want, def);
                self.check_operand_configs(env, &x.then, want, def);
                self.check_operand_configs(env, &x.orelse, want, def);
            }
            // a call of a value of unknown type (`any`, or a function defined further down):
            // upstream's resolver reads its positional arguments where the call is, against
            // the type expected of it
            ExprKind::Call { func, args } if self.callee_unknown(env, func) => {
                for a in &args.args {
                    self.check_operand_configs(env, a, want, def);
                }
            }
            _ => {}
        }
    }

    /// Whether the checker knows nothing of `func`'s type. Its errors (an undefined name) are
    /// reported here, before the arguments' (as upstream resolves the callee first); the
    /// whole call's later walk finds them again, and the package's repeated errors are
    /// dropped.
    fn callee_unknown(&mut self, env: &Env, func: &Expr) -> bool {
        self.infer(env, func).is_any()
    }
}
