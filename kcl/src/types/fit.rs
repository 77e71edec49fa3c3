//! Values against the type they must have: assignments, attribute defaults, dict and schema
//! config entries, and the `+=`/`:`/`=` operators on them.

use super::*;
use whole::{IfWant, is_elif};

impl<'a> Checker<'a> {
    /// Check `e` against `expected`; errors go to `span` with a "defined here" note at
    /// `def` (where the expected type was declared).
    pub(super) fn check_value(
        &mut self,
        env: &Env,
        e: &Expr,
        expected: &Ty,
        span: Span,
        def: Option<Span>,
    ) {
        if expected.is_any() {
            // everything is stored where `any` is wanted, but a module
            let got = self.infer(env, e);
            self.fits(&got, expected, span, def);
            return;
        }
        let inner = strip_paren(e);
        match (&inner.kind, expected) {
            (ExprKind::Config(entries), Ty::Schema(id)) => {
                self.check_schema_config(env, entries, &[*id]);
                return;
            }
            (ExprKind::Config(entries), Ty::Union(ts))
                if ts.iter().all(|t| matches!(t, Ty::Schema(_))) =>
            {
                self.check_schema_config(env, entries, &union_schemas(ts));
                return;
            }
            // a union of schemas and types no config fits (no dict): the schemas' members
            (ExprKind::Config(entries), Ty::Union(_))
                if schema_ids(expected).is_some_and(|(_, mixed)| mixed) =>
            {
                let (ids, _) = schema_ids(expected).unwrap_or_default();
                let before = self.errors.len();
                self.mixed_union = true;
                self.check_schema_config(env, entries, &ids);
                self.mixed_union = false;
                if self.errors.len() > before {
                    return;
                }
            }
            (ExprKind::Config(entries), Ty::Dict(kt, vt)) => {
                self.check_dict_literal(env, e, entries, (expected, kt, vt), span, (def, def));
                return;
            }
            // a config literal where a list is expected: upstream checks its values against
            // the list's item type first, then reports the whole literal
            (ExprKind::Config(entries), Ty::List(et)) => {
                let before = self.errors.len();
                self.check_dict_config(env, entries, expected, et, def);
                if self.errors.len() > before {
                    return;
                }
            }
            // a list of configs where a list of schemas (or of a union of schemas) is expected:
            // each config against the schema (dicts against a dict type are compared as a whole list type)
            (ExprKind::List(items), Ty::List(et))
                if (matches!(**et, Ty::Schema(_))
                    || matches!(&**et, Ty::Union(ts) if ts.iter().all(|t| matches!(t, Ty::Schema(_)))))
                    && !items.is_empty()
                    && items
                        .iter()
                        .all(|it| matches!(strip_paren(it).kind, ExprKind::Config(_))) =>
            {
                for it in items.iter() {
                    self.check_value(env, it, et, it.span, def);
                }
                return;
            }
            // config literals in a list of dicts: each against the dict type (its entries'
            // errors), then the list as a whole
            (ExprKind::List(items), Ty::List(et))
                if matches!(**et, Ty::Dict(..))
                    && items
                        .iter()
                        .any(|it| matches!(strip_paren(it).kind, ExprKind::Config(_))) =>
            {
                let before = self.errors.len();
                for it in items.iter() {
                    // (their values only: upstream does not look at the keys' type here)
                    if let ExprKind::Config(entries) = &strip_paren(it).kind
                        && let Ty::Dict(_, vt) = &**et
                    {
                        self.check_dict_config(env, entries, et, vt, def);
                    }
                }
                let got = self.infer(env, e);
                self.fits(&got, expected, span, def);
                self.drop_repeated_errors(before);
                return;
            }
            // config literals in a list where a dict is expected: upstream's config context
            // reads each against the dict's value type, then the list is refused whole
            (ExprKind::List(items), Ty::Dict(_, vt)) if wants_configs(vt) => {
                let before = self.errors.len();
                for it in items.iter() {
                    if matches!(strip_paren(it).kind, ExprKind::Config(_)) {
                        self.check_operand_configs(env, it, vt, def);
                    }
                }
                let got = self.infer(env, e);
                self.fits(&got, expected, span, def);
                self.drop_repeated_errors(before);
                return;
            }
            // a comprehension's element (a dict comprehension's value), and list items that
            // are conditionals or operators: upstream checks the config literals in them
            // against the item type expected of the whole, before the whole's own type
            (ExprKind::ListComp(c), Ty::List(et)) if wants_configs(et) => {
                self.check_comp_element(env, e, (&c.clauses, &c.elt, et), expected, span, def);
                return;
            }
            (ExprKind::DictComp(c), Ty::Dict(_, vt)) if wants_configs(vt) => {
                self.check_comp_element(env, e, (&c.clauses, &c.value, vt), expected, span, def);
                return;
            }
            (ExprKind::List(items), Ty::List(et))
                if wants_configs(et)
                    && items.iter().any(|it| {
                        matches!(
                            strip_paren(it).kind,
                            ExprKind::If(_)
                                | ExprKind::Binary { .. }
                                | ExprKind::Unary { .. }
                                | ExprKind::Subscript { .. }
                                | ExprKind::Selector(_)
                        )
                    }) =>
            {
                let before = self.errors.len();
                for it in items.iter() {
                    self.check_operand_configs(env, it, et, def);
                }
                let got = self.infer(env, e);
                self.fits(&got, expected, span, def);
                self.drop_repeated_errors(before);
                return;
            }
            // configs merged into a schema slot (`base | {k = v}`): upstream merges the
            // entries' types and checks each against the schema, so each side is checked
            (
                ExprKind::Binary {
                    op: ast::BinOp::BitOr,
                    left,
                    right,
                },
                Ty::Schema(_),
            ) => {
                self.infer(env, inner);
                let before = self.errors.len();
                self.check_value(env, left, expected, span, def);
                self.check_value(env, right, expected, span, def);
                // the sides' own errors were found once already
                self.drop_repeated_errors(before);
                return;
            }
            // any other operator, a conditional or a quantifier: upstream checks the config
            // literals among its operands (and in what is subscripted or selected from; not in
            // calls or lists) against the schema, list or dict type expected of the whole,
            // before the expression's own type
            (
                ExprKind::Unary { .. }
                | ExprKind::Binary { .. }
                | ExprKind::Compare(_)
                | ExprKind::If(_)
                | ExprKind::Quant(_)
                | ExprKind::Call { .. }
                | ExprKind::As { .. }
                | ExprKind::Subscript { .. }
                | ExprKind::Selector(_),
                _,
            ) if schema_ids(expected).is_some()
                || matches!(expected, Ty::List(_) | Ty::Dict(..)) =>
            {
                let before = self.errors.len();
                self.check_operand_configs(env, inner, expected, def);
                let got = self.infer(env, e);
                self.fits(&got, expected, span, def);
                self.drop_repeated_errors(before);
                return;
            }
            _ => {}
        }
        let got = self.infer(env, e);
        self.fits(&got, expected, span, def);
    }

    /// The config literals among the operands of `e` (through parentheses, operators,
    /// conditionals, quantifier targets and, where a list is expected, list literals) checked
    /// against `expected` (schemas, a list's item type, a dict's types), without their own
    /// type compared to it.
    /// A comprehension `e` whose element (`clauses`, the checked expression, the item type
    /// it must fit) is checked first, then the whole against `expected`.
    fn check_comp_element(
        &mut self,
        env: &Env,
        e: &Expr,
        (clauses, elt, item): (&[ast::CompClause], &Expr, &Ty),
        expected: &Ty,
        span: Span,
        def: Option<Span>,
    ) {
        let before = self.errors.len();
        let env2 = self.comp_env(env, clauses);
        self.check_operand_configs(&env2, elt, item, def);
        let got = self.infer(env, e);
        self.fits(&got, expected, span, def);
        self.drop_repeated_errors(before);
    }

    /// A config literal `e` against the dict type `(dict, key, value)`: its entries' values
    /// (their notes at `defs.0`), then the literal as a whole (its keys among it) at `span`
    /// (its note at `defs.1`), as upstream checks it.
    pub(super) fn check_dict_literal(
        &mut self,
        env: &Env,
        e: &Expr,
        entries: &[ast::ConfigEntry],
        (dict, kt, vt): (&Ty, &Ty, &Ty),
        span: Span,
        defs: (Option<Span>, Option<Span>),
    ) {
        let before = self.errors.len();
        self.check_dict_config(env, entries, dict, vt, defs.0);
        // the whole can only fail where an entry did or a key may not fit: a literal of
        // names and strings under a string key type is not inferred again (a large literal
        // would be walked twice; the empty key's value was not checked as an entry)
        let str_keys = entries.iter().all(|en| {
            matches!(&en.kind, ast::ConfigEntryKind::KeyValue { key, .. }
                if matches!(&key.kind, ExprKind::Ident(_))
                    || matches!(&key.kind, ExprKind::Str(s) if !s.is_empty()))
        });
        // (every string fits the key type only if it takes `str`: a string literal key type
        // takes only its own literal keys)
        let any_str = |t: &Ty| matches!(t, Ty::Str | Ty::Any);
        let str_fits = match kt {
            Ty::Union(ts) => ts.iter().any(any_str),
            t => any_str(t),
        };
        if self.errors.len() > before || !str_keys || !str_fits {
            let got = self.infer(env, e);
            self.fits(&got, dict, span, defs.1);
            self.drop_repeated_errors(before);
        }
    }

    /// Errors found again since `before` (the same message at the same place) are dropped: a
    /// value checked in parts and then whole reports each problem once.
    pub(super) fn drop_repeated_errors(&mut self, before: usize) {
        // (notes count: upstream's `if` entry reports one message at the `if` per key)
        let key = |e: &EvalError| (e.msg.clone(), e.span, e.notes.clone());
        let mut seen: Vec<_> = self.errors[..before].iter().map(key).collect();
        let mut i = before;
        while i < self.errors.len() {
            let k = key(&self.errors[i]);
            if seen.contains(&k) {
                self.errors.remove(i);
            } else {
                seen.push(k);
                i += 1;
            }
        }
    }

    /// Whether `got` fits `expected`; if not, upstream's type error at `span` (with a note at
    /// the declaration `def`).
    pub(super) fn fits(&mut self, got: &Ty, expected: &Ty, span: Span, def: Option<Span>) -> bool {
        if !assignable(got, expected, &|a, b| self.is_sub_schema(a, b)) {
            let (es, gs) = (self.ty_str(expected), self.ty_str(got));
            let mut err = EvalError::new(
                ErrKind::Type,
                format!("expected {es}, got {gs}"),
                Some(span.shrink_to_lo()),
            );
            if let Some(d) = def
                && d != span
            {
                err = err.with_note(
                    d.shrink_to_lo(),
                    format!("variable is defined here, its type is {es}, but got {gs}"),
                );
            }
            self.errors.push(err);
            return false;
        }
        true
    }

    /// An instance of schema `id` unpacked into a dict whose values are `vt`: upstream checks
    /// each of the schema's own attributes against `vt`, noting where the attribute is declared.
    fn check_unpacked_instance(&mut self, id: SchemaId, vt: &Ty, span: Span, def: Option<Span>) {
        let m = self.members(id);
        // (its own attributes: upstream's instance type carries no inherited ones here)
        for name in m.order.iter().filter(|n| m.declared.contains(n)) {
            let Some((t, at)) = m.attrs.get(name) else {
                continue;
            };
            if !self.fits(t, vt, span, def)
                && let Some(e) = self.errors.pop()
            {
                let e = e.with_note(at.shrink_to_lo(), "config attribute is defined here");
                self.errors.push(e);
            }
        }
    }

    /// Upstream rejects config keys statically known not to be strings; false when reported.
    /// `every`: each member of a union must be a string (a comprehension's key), not one.
    pub(super) fn check_str_key(&mut self, t: &Ty, span: Span, every: bool) -> bool {
        let ok = if every {
            is_every_str_key(t)
        } else {
            is_str_key(t)
        };
        if !ok {
            let msg = format!("A attribute must be string type, got '{}'", self.ty_str(t));
            self.err(ErrKind::Attribute, msg, span);
        }
        ok
    }

    /// Entries of a config literal checked against a dict type `{K:V}`.
    pub(super) fn check_dict_config(
        &mut self,
        env: &Env,
        entries: &[ast::ConfigEntry],
        dict_ty: &Ty,
        vt: &Ty,
        def: Option<Span>,
    ) {
        let env = &self.config_env(env, entries);
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, op, value } => {
                    if self.loop_var_key(env, key, *op, value) {
                        continue;
                    }
                    // (a key of the wrong type is found by the check of the whole literal:
                    // upstream reads each entry's value against the dict's value type only)
                    if !matches!(key.kind, ExprKind::Ident(_) | ExprKind::Str(_))
                        && key_path(key).is_none()
                    {
                        let t = self.infer_config_key(env, key);
                        if !is_str_key(&t) {
                            // upstream walks the value first (its own entries' errors come
                            // before this key's), then reports the key; a key that is no name
                            // does not step into the dict's value type, so a config literal's
                            // entries are read against the dict itself
                            if let ExprKind::Config(inner) = &strip_paren(value).kind {
                                self.check_dict_config(env, inner, dict_ty, vt, def);
                            } else {
                                self.infer(env, value);
                            }
                            self.check_str_key(&t, key.span, false);
                            continue;
                        }
                    }
                    // upstream's resolver reads no entry under the empty key: the value meets
                    // the dict's type only in the check of the whole literal
                    if matches!(&key.kind, ExprKind::Str(s) if s.is_empty()) {
                        self.infer(env, value);
                        continue;
                    }
                    if matches!(key.kind, ExprKind::Selector(_)) {
                        match key_path(key) {
                            Some(path) => self.check_dict_path(env, &path, *op, value, vt, def),
                            None => {
                                let t = self.infer(env, value);
                                self.check_insert(*op, &t, value.span);
                            }
                        }
                    } else if *op == ast::ConfigOp::Insert {
                        // (the value's config literals against the type first, as at `=`)
                        self.check_value(env, value, vt, key.span, def);
                        let t = self.infer(env, value);
                        if self.fits(&t, vt, key.span, def) {
                            self.check_insert(*op, &t, value.span);
                        }
                    } else {
                        // the value, then its type at the key (a dict literal meeting a
                        // schema compared by its attributes)
                        self.check_value(env, value, vt, key.span, def);
                        let before = self.errors.len();
                        self.check_parts(env, value, vt, key.span);
                        self.drop_repeated_errors(before);
                    }
                }
                // an unpacked config literal's entries are the dict's entries
                ast::ConfigEntryKind::Unpack { value: v, .. } => match &strip_paren(v).kind {
                    ExprKind::Config(inner) => {
                        self.check_dict_config(env, inner, dict_ty, vt, def);
                    }
                    // an unpacked dict comprehension's value: a config literal read against
                    // the dict's value type
                    ExprKind::DictComp(c)
                        if matches!(strip_paren(&c.value).kind, ExprKind::Config(_)) =>
                    {
                        let env2 = self.comp_env(env, &c.clauses);
                        self.check_operand_configs(&env2, &c.value, vt, def);
                        self.infer(env, v);
                    }
                    // config literals among its operands (`**{a: 1} | {b: 2}`) against the dict
                    _ => {
                        self.check_operand_configs(env, v, dict_ty, def);
                        if let Ty::Schema(id) = self.infer(env, v) {
                            self.check_unpacked_instance(id, vt, v.span, def);
                        }
                    }
                },
                ast::ConfigEntryKind::If(ci) => {
                    // upstream checks config literals in the condition against this dict too
                    self.check_operand_configs(env, &ci.cond, dict_ty, def);
                    self.infer(env, &ci.cond);
                    let elif = std::mem::take(&mut self.config_elif);
                    self.check_dict_config(env, &ci.body, dict_ty, vt, def);
                    self.config_elif = is_elif(&ci.orelse);
                    self.check_dict_config(env, &ci.orelse, dict_ty, vt, def);
                    self.config_elif = false;
                    if ci.orelse.is_empty() && !elif {
                        self.check_if_entry_whole(env, en.span(), &ci.body, IfWant::Dict(vt), def);
                    }
                }
            }
        }
    }

    /// `a.b.c = value` in a config literal whose values have type `vt`: `a`'s value is the
    /// dict `{b = {c = value}}`, so each name goes one dict value type deeper; where the
    /// expected type is no dict, upstream reports the nested dict the rest of the path makes.
    fn check_dict_path(
        &mut self,
        env: &Env,
        path: &[(Symbol, Span)],
        op: ast::ConfigOp,
        value: &Expr,
        vt: &Ty,
        def: Option<Span>,
    ) {
        let mut expected = vt.clone();
        // the dict levels passed through: (name's place, the type it must have)
        let mut levels: Vec<(Span, Ty)> = Vec::new();
        for (i, &(_, at)) in path.iter().enumerate() {
            let last = i + 1 == path.len();
            if last {
                if op == ast::ConfigOp::Insert {
                    let t = self.infer(env, value);
                    if self.fits(&t, &expected, at, def) {
                        self.check_insert(op, &t, value.span);
                    }
                } else {
                    self.check_value(env, value, &expected, at, def);
                }
                // upstream's `k.y = v` is `k: {y = v}`: each dict the path makes is checked
                // against its level too, innermost first
                let mut got = self.quiet_type_of(env, value);
                for (j, (at, want)) in levels.into_iter().enumerate().rev() {
                    let name = path[j + 1].0;
                    got = Ty::Dict(
                        Rc::new(Ty::StrLit(std::sync::Arc::from(name.as_str()))),
                        Rc::new(got),
                    );
                    self.fits(&got, &want, at, def);
                }
                return;
            }
            match expected {
                Ty::Dict(_, ref v) => {
                    let inner = (**v).clone();
                    levels.push((at, std::mem::replace(&mut expected, inner)));
                }
                // upstream rewrites `k.y = v` to `k: {y = v}`: the rest of the path is a
                // config entry against the schema
                Ty::Schema(id) => {
                    let Some(key) = path_expr(&path[i + 1..]) else {
                        break;
                    };
                    let entry = ast::ConfigEntry {
                        kind: ast::ConfigEntryKind::KeyValue {
                            key,
                            op,
                            value: value.clone(),
                        },
                    };
                    self.check_schema_config(env, std::slice::from_ref(&entry), &[id]);
                    return;
                }
                Ty::Any | Ty::Union(_) => break,
                _ => {
                    let mut got = self.infer(env, value);
                    for &(name, _) in path[i + 1..].iter().rev() {
                        got = Ty::Dict(
                            Rc::new(Ty::StrLit(std::sync::Arc::from(name.as_str()))),
                            Rc::new(got),
                        );
                    }
                    self.fits(&got, &expected, at, def);
                    return;
                }
            }
        }
        let t = self.infer(env, value);
        self.check_insert(op, &t, value.span);
    }

    /// `key += value` appends to a list: upstream rejects a value statically known not to be
    /// one.
    pub(super) fn check_insert(&mut self, op: ast::ConfigOp, t: &Ty, span: Span) {
        let list = |t: &Ty| matches!(t, Ty::Any | Ty::List(_));
        let ok = match t {
            Ty::Union(ts) => ts.iter().all(list),
            t => list(t),
        };
        if op == ast::ConfigOp::Insert && !ok {
            let msg = format!("only list type can in inserted, got '{}'", self.ty_str(t));
            self.err(ErrKind::Attribute, msg, span.shrink_to_lo());
        }
    }
}

/// Whether a config key of type `t` may be a string (what upstream requires of a config key).
/// A comprehension's key type: every member of a union is a string (or None).
pub(super) fn is_every_str_key(t: &Ty) -> bool {
    match t {
        Ty::Union(ts) => ts.iter().all(|t| matches!(t, Ty::None) || is_str_key(t)),
        t => is_str_key(t),
    }
}

fn is_str_key(t: &Ty) -> bool {
    let stringy = |t: &Ty| t.is_any() || matches!(t, Ty::Str | Ty::StrLit(_));
    match t {
        Ty::Union(ts) => ts.iter().any(stringy),
        t => stringy(t),
    }
}

/// The schema members of a union, in order.
pub(super) fn union_schemas(ts: &[Ty]) -> Vec<SchemaId> {
    ts.iter()
        .filter_map(|t| match t {
            Ty::Schema(i) => Some(*i),
            _ => None,
        })
        .collect()
}

/// The schemas a config literal of type `t` must be one of (a schema, or the schemas of a
/// union no other member of which takes a config), and whether the union has other members.
pub(super) fn schema_ids(t: &Ty) -> Option<(Vec<SchemaId>, bool)> {
    match t {
        Ty::Schema(id) => Some((vec![*id], false)),
        Ty::Union(ts) => {
            let ids = union_schemas(ts);
            let takes_config = ts.iter().any(|t| matches!(t, Ty::Dict(..) | Ty::Any));
            let mixed = ids.len() < ts.len();
            (!ids.is_empty() && !takes_config).then_some((ids, mixed))
        }
        _ => None,
    }
}

/// Whether config literals are checked against `t` where it is expected: schemas, lists and
/// dicts.
pub(super) fn wants_configs(t: &Ty) -> bool {
    schema_ids(t).is_some() || matches!(t, Ty::List(_) | Ty::Dict(..))
}
