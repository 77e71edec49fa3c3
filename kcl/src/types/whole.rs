//! A value checked whole against a declared type, where upstream's resolver reads no config
//! literal in it against that type (a schema attribute's default of a list, dict or union
//! type, `+=` on a schema attribute): only the value's inferred type must fit, and a config
//! literal meeting a schema is a dict type whose attribute types are compared with the
//! schema's own attributes, every error at the one place the value is checked.

use super::*;

/// A config entry's value as upstream's resolver sees it: the written expression, or for a
/// key path `a.b.c = v` (which upstream rewrites to `a: {b: {c = v}}`) the nested literal
/// `{b: {c = v}}`, as the names still to nest and the value.
#[derive(Clone)]
/// What a config `if` entry's keys must fit: a schema's attributes or a dict's value type.
pub(super) enum IfWant<'t> {
    Schema(SchemaId),
    Dict(&'t Ty),
}

/// Upstream's dict type of a config literal, as far as a schema check reads it: each
/// attribute (name, first key's place, values) and the names of its key type.
type DictAttrs<'e> = (Vec<(Symbol, Span, Vec<EntryValue<'e>>)>, Vec<Symbol>);

enum EntryValue<'e> {
    Expr(&'e Expr),
    Nested(Vec<(Symbol, Span)>, &'e Expr),
}

impl<'a> Checker<'a> {
    /// `e` against `expected` as a whole (see the module doc); errors at `span`, the
    /// declaration `def` noted on the whole value's error.
    pub(super) fn check_whole(
        &mut self,
        env: &Env,
        e: &Expr,
        expected: &Ty,
        span: Span,
        def: Option<Span>,
    ) {
        let got = self.infer(env, e);
        let before = self.errors.len();
        // upstream compares the parts first (a config meeting a schema reports there and
        // passes), the whole after
        self.whole_parts(env, EntryValue::Expr(e), expected, span);
        self.fits(&got, expected, span, def);
        self.drop_repeated_errors(before);
    }

    /// The parts of `e` against `expected` (see `whole_parts`), as the new items or entries of
    /// `x += e` and `x |= e` are checked against `x`'s type.
    pub(super) fn check_parts(&mut self, env: &Env, e: &Expr, expected: &Ty, span: Span) {
        // (only a dict meeting a schema can be reported: a type without one has nothing to
        // check, and skipping it saves inferring the value again)
        if has_schema(expected) {
            self.whole_parts(env, EntryValue::Expr(e), expected, span);
        }
    }

    /// The type of `v` without reporting anything (its errors were reported where it was
    /// inferred first).
    /// The type of `e`, its errors left to where it is checked.
    pub(super) fn quiet_type_of(&mut self, env: &Env, e: &Expr) -> Ty {
        self.quiet_type(env, &EntryValue::Expr(e))
    }

    fn quiet_type(&mut self, env: &Env, v: &EntryValue<'_>) -> Ty {
        let before = self.errors.len();
        let t = match v {
            EntryValue::Expr(e) => self.infer(env, e),
            // `{b: {c = v}}`: a dict keyed by the first name, widened where it is stored
            EntryValue::Nested(names, e) => {
                let mut t = self.infer(env, e);
                for (n, _) in names.iter().rev() {
                    t = Ty::Dict(Rc::new(Ty::StrLit(n.as_str().into())), Rc::new(t));
                }
                t
            }
        };
        self.errors.truncate(before);
        t
    }

    /// Upstream's `check_type` of `v`'s type against `expected`, for the part that can
    /// report: dict types meeting schemas, through lists, dict values, unions and the
    /// branches of a conditional.
    fn whole_parts(&mut self, env: &Env, v: EntryValue<'_>, expected: &Ty, span: Span) {
        let e = match &v {
            EntryValue::Expr(e) => strip_paren(e),
            EntryValue::Nested(names, value) => {
                self.nested_parts(env, names, value, expected, span);
                return;
            }
        };
        match (&e.kind, expected) {
            (_, Ty::Any) => {}
            // the conditional's type is the union of its branches: each is checked
            (ExprKind::If(x), _) => {
                for part in self.unsubsumed(env, &[&x.then, &x.orelse]) {
                    self.whole_parts(env, EntryValue::Expr(part), expected, span);
                }
            }
            // `a or b` is the union of its operands' types, so is `[..] + [..]`'s item type
            (
                ExprKind::Binary {
                    op: ast::BinOp::Or,
                    left,
                    right,
                },
                _,
            )
            | (
                ExprKind::Binary {
                    op: ast::BinOp::Add,
                    left,
                    right,
                },
                Ty::List(_),
            ) => {
                for part in self.unsubsumed(env, &[left, right]) {
                    self.whole_parts(env, EntryValue::Expr(part), expected, span);
                }
            }
            (_, Ty::Union(ts)) => {
                // the first member the value's type can be checked against
                let got = self.quiet_type(env, &v);
                let config = matches!(got, Ty::Dict(..));
                let sub = |a, b| self.is_sub_schema(a, b);
                if let Some(t) = ts
                    .iter()
                    .find(|t| (config && matches!(t, Ty::Schema(_))) || assignable(&got, t, &sub))
                {
                    let t = t.clone();
                    self.whole_parts(env, v, &t, span);
                }
            }
            (ExprKind::List(items), Ty::List(et)) => {
                let items: Vec<&Expr> = items
                    .iter()
                    .filter(|it| !matches!(it.kind, ExprKind::Starred(_)))
                    .collect();
                for it in self.unsubsumed(env, &items) {
                    self.whole_parts(env, EntryValue::Expr(it), et, span);
                }
            }
            (ExprKind::ListComp(c), Ty::List(et)) => {
                let env2 = self.comp_env(env, &c.clauses);
                self.whole_parts(&env2, EntryValue::Expr(&c.elt), et, span);
            }
            (ExprKind::DictComp(c), Ty::Dict(_, vt)) => {
                let env2 = self.comp_env(env, &c.clauses);
                self.whole_parts(&env2, EntryValue::Expr(&c.value), vt, span);
            }
            (ExprKind::Config(entries), Ty::Dict(kt, vt)) => {
                // the keys first: a dict whose keys do not fit has its values unchecked
                if let Ty::Dict(gk, _) = self.quiet_type(env, &v)
                    && !assignable(&gk, kt, &|a, b| self.is_sub_schema(a, b))
                {
                    return;
                }
                for en in entries {
                    if let ast::ConfigEntryKind::KeyValue { key, value, .. } = &en.kind {
                        match key_path(key) {
                            Some(p) if p.len() > 1 => {
                                self.nested_parts(env, &p[1..], value, vt, span)
                            }
                            _ => self.whole_parts(env, EntryValue::Expr(value), vt, span),
                        }
                    }
                }
            }
            (ExprKind::Config(entries), Ty::Schema(id)) => {
                let attrs = self.dict_type_attrs(env, entries);
                self.attrs_against_schema(env, attrs, *id, span);
            }
            _ => {}
        }
    }

    /// The parts whose types make the union upstream's resolver takes of them (`sup`): one
    /// of each type, none whose type is a subtype of another part's (a `{}` or a `[]` takes
    /// every dict or list).
    fn unsubsumed<'e>(&mut self, env: &Env, parts: &[&'e Expr]) -> Vec<&'e Expr> {
        let tys: Vec<Ty> = parts
            .iter()
            .map(|p| self.quiet_type(env, &EntryValue::Expr(p)))
            .collect();
        let sub = |a, b| self.is_sub_schema(a, b);
        let mut removed = vec![false; parts.len()];
        for i in 0..tys.len() {
            for j in i + 1..tys.len() {
                if sup_subsume(&tys[i], &tys[j], &sub) {
                    removed[i] = true;
                } else if sup_subsume(&tys[j], &tys[i], &sub) {
                    removed[j] = true;
                }
            }
        }
        parts
            .iter()
            .zip(removed)
            .filter(|(_, r)| !r)
            .map(|(p, _)| *p)
            .collect()
    }

    /// `{names[0]: {names[1]: ... value}}` against `expected`.
    fn nested_parts(
        &mut self,
        env: &Env,
        names: &[(Symbol, Span)],
        value: &Expr,
        expected: &Ty,
        span: Span,
    ) {
        let Some(((n, at), rest)) = names.split_first() else {
            return self.whole_parts(env, EntryValue::Expr(value), expected, span);
        };
        match expected {
            Ty::Dict(kt, vt)
                if assignable(&Ty::StrLit(n.as_str().into()), kt, &|a, b| {
                    self.is_sub_schema(a, b)
                }) =>
            {
                self.nested_parts(env, rest, value, vt, span);
            }
            Ty::Schema(id) => {
                let attrs = Some((
                    vec![(*n, *at, vec![EntryValue::Nested(rest.to_vec(), value)])],
                    vec![*n],
                ));
                self.attrs_against_schema(env, attrs, *id, span);
            }
            Ty::Union(ts) => {
                if let Some(t) = ts
                    .iter()
                    .find(|t| matches!(t, Ty::Schema(_) | Ty::Dict(..) | Ty::Any))
                {
                    let t = t.clone();
                    self.nested_parts(env, names, value, &t, span);
                }
            }
            _ => {}
        }
    }

    /// The attributes of upstream's dict type of a config literal, each name with its first
    /// key's place and its values, and the names its key type is made of: those of the
    /// literal's own keys, of the config literals it unpacks and of its `if` entries. A
    /// package variable holding a config literal unpacked adds its attributes but no key
    /// name, and leaves the key type no single name unless a key follows it (as kcl-lib
    /// 0.12.4 does: `{**b, x = 1}` and `{x = 1, **b, x = 2}` are checked at `x`, `{x = 1,
    /// **b}` is not). `None` when some key is of another kind or something else is unpacked.
    fn dict_type_attrs<'e>(
        &mut self,
        env: &Env,
        entries: &'e [ast::ConfigEntry],
    ) -> Option<DictAttrs<'e>>
    where
        'a: 'e,
    {
        let mut out = (Vec::new(), Vec::new());
        let mut unpacked = (false, false);
        self.dict_type_attrs_into(env, entries, &mut out, &mut unpacked, 0)?;
        if unpacked == (true, false) {
            out.1.clear();
        }
        Some(out)
    }

    /// (`unpacked`: whether a variable was unpacked, and a key came after the first)
    fn dict_type_attrs_into<'e>(
        &mut self,
        env: &Env,
        entries: &'e [ast::ConfigEntry],
        out: &mut DictAttrs<'e>,
        unpacked: &mut (bool, bool),
        depth: u32,
    ) -> Option<()>
    where
        'a: 'e,
    {
        if depth >= 8 {
            return None;
        }
        for en in entries {
            let (key, value) = match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, value, .. } => (key, value),
                ast::ConfigEntryKind::Unpack { value, .. } => {
                    match &strip_paren(value).kind {
                        ExprKind::Config(inner) => {
                            self.dict_type_attrs_into(env, inner, out, unpacked, depth + 1)?
                        }
                        _ => {
                            let inner = self.variable_config(env, value)?;
                            let keys = out.1.len();
                            let outer = *unpacked;
                            self.dict_type_attrs_into(env, inner, out, unpacked, depth + 1)?;
                            out.1.truncate(keys);
                            *unpacked = (true, outer.1);
                        }
                    }
                    continue;
                }
                ast::ConfigEntryKind::If(ci) => {
                    self.dict_type_attrs_into(env, &ci.body, out, unpacked, depth + 1)?;
                    self.dict_type_attrs_into(env, &ci.orelse, out, unpacked, depth + 1)?;
                    continue;
                }
            };
            let name = push_entry_value(&mut out.0, key, value)?;
            if !out.1.contains(&name) {
                out.1.push(name);
            }
            unpacked.1 |= unpacked.0;
        }
        Some(())
    }

    /// A dict type's attributes (`None`: some key is no name upstream records, so its key
    /// type is no single name) against schema `id`: with one key name and no index
    /// signature, that attribute; with an index signature, each name.
    fn attrs_against_schema(
        &mut self,
        env: &Env,
        attrs: Option<DictAttrs<'_>>,
        id: SchemaId,
        span: Span,
    ) {
        let (st, pkg, file) = {
            let s = &self.schemas[id.0];
            (s.stmt, s.pkg, s.file)
        };
        let own = |name: Symbol| {
            st.body.iter().find_map(|s| match &s.kind {
                StmtKind::SchemaAttr(a) if a.name.sym == name => Some(a),
                _ => None,
            })
        };
        let widened = |c: &mut Self, vals: &[EntryValue<'_>]| {
            let ts = vals
                .iter()
                .map(|v| c.quiet_type(env, v).variable_type())
                .collect();
            Ty::union(ts)
        };
        match (&st.index_signature, attrs) {
            (Some(is), Some((attrs, _))) => {
                let value_ty = self.resolve_type(pkg, file, &is.value_ty);
                for (name, at, vals) in attrs {
                    let t = widened(self, &vals);
                    match own(name).filter(|_| is.any_other) {
                        Some(a) => {
                            let want = self.resolve_type(pkg, file, &a.ty);
                            self.fits(&t, &want, span, Some(a.name.span));
                        }
                        None => {
                            self.fits(&t, &value_ty, at, None);
                        }
                    }
                }
            }
            (None, Some((attrs, keys))) if keys.len() == 1 => {
                let Some((name, _, vals)) = attrs.iter().find(|(n, ..)| *n == keys[0]) else {
                    return;
                };
                if let Some(a) = own(*name) {
                    let want = self.resolve_type(pkg, file, &a.ty);
                    let t = widened(self, vals);
                    self.fits(&t, &want, span, Some(a.name.span));
                }
            }
            _ => {}
        }
    }
}

impl<'a> Checker<'a> {
    /// `**v` in a config of schema `id`, where `v` is a config literal or names a
    /// package-level variable holding one: upstream's dict type keeps the literal's keys (its
    /// `if` entries' too), so each must be one of the schema's attributes and fit its type
    /// (reported at `v`, noted at the key).
    pub(super) fn check_unpacked_attrs(&mut self, env: &Env, v: &Expr, id: SchemaId) {
        let entries = match &strip_paren(v).kind {
            ExprKind::Config(entries) => Some(&entries[..]),
            _ => self.variable_config(env, v),
        };
        let Some(entries) = entries else {
            return;
        };
        let mut attrs = Vec::new();
        if !self.unpacked_config_attrs(env, entries, &mut attrs, 0, true) {
            return;
        }
        self.check_attrs_whole(env, attrs, &IfWant::Schema(id), v.span, None, true);
    }

    /// `a.b.x = v` where `b` is a schema: upstream gives `b` the dict `{x = v}` and checks it
    /// whole too, at `b` (`at`), after the value itself (a config literal is checked whole at
    /// its own key instead).
    pub(super) fn check_path_whole(
        &mut self,
        env: &Env,
        value: &Expr,
        want: &Ty,
        def: Span,
        at: Option<Span>,
    ) {
        if let Some(at) = at
            && !matches!(strip_paren(value).kind, ExprKind::Config(_))
        {
            let got = self.quiet_type_of(env, value).variable_type();
            self.fits(&got, want, at, Some(def));
        }
    }

    /// A config `if` entry without `else` (its body `entries`, the entry at `span`): after its
    /// entries one by one, upstream's resolver checks the dict type of the keys the body sets
    /// (values widened) against what the config takes, reported at the `if` with a note at
    /// each key.
    pub(super) fn check_if_entry_whole(
        &mut self,
        env: &Env,
        span: Span,
        entries: &[ast::ConfigEntry],
        want: IfWant<'_>,
        def: Option<Span>,
    ) {
        let mut attrs = Vec::new();
        if self.unpacked_config_attrs(env, entries, &mut attrs, 0, true) {
            self.check_attrs_whole(env, attrs, &want, span, def, true);
        }
    }

    /// Each name a config sets (with its values) against a schema's attributes or a dict's
    /// value type, at `span`, noting the key (on a type error too when `note_types`).
    fn check_attrs_whole(
        &mut self,
        env: &Env,
        attrs: Vec<(Symbol, Span, Vec<EntryValue<'_>>)>,
        want: &IfWant<'_>,
        span: Span,
        def: Option<Span>,
        note_types: bool,
    ) {
        let members = match want {
            IfWant::Schema(id) => Some(self.members(*id)),
            IfWant::Dict(_) => None,
        };
        for (name, at, vals) in attrs {
            let wanted = match (want, &members) {
                (IfWant::Dict(vt), _) => Some(((*vt).clone(), def)),
                (_, Some(m)) => m.attrs.get(&name).cloned().map(|(t, d)| (t, Some(d))),
                _ => None,
            };
            // (the key is noted where the value is not the config itself)
            let note = |e: EvalError| match at != span {
                true => e.with_note(at.shrink_to_lo(), "config attribute is defined here"),
                false => e,
            };
            match wanted {
                Some((want, def)) => {
                    let ts = vals
                        .iter()
                        .map(|x| self.quiet_type(env, x).variable_type())
                        .collect();
                    if !self.fits(&Ty::union(ts), &want, span, def) {
                        if note_types && let Some(e) = self.errors.pop() {
                            self.errors.push(note(e));
                        }
                    } else if let Ty::Schema(inner) = want {
                        // a config literal's keys go on against the attribute's schema, still
                        // reported at `span` (upstream's dict type keeps them)
                        let mut nested = Vec::new();
                        let all_literals = vals.iter().all(|x| match x {
                            EntryValue::Expr(e) => match &strip_paren(e).kind {
                                ExprKind::Config(es) => {
                                    self.unpacked_config_attrs(env, es, &mut nested, 0, false)
                                }
                                _ => false,
                            },
                            EntryValue::Nested(..) => false,
                        });
                        if all_literals {
                            let want = IfWant::Schema(inner);
                            self.check_attrs_whole(env, nested, &want, span, None, true);
                        }
                    }
                }
                None if members.as_ref().is_none_or(|m| m.open)
                    && match want {
                        IfWant::Schema(id) => self.sig_takes_key(*id, name),
                        IfWant::Dict(_) => true,
                    } => {}
                None => {
                    let IfWant::Schema(id) = want else { continue };
                    let msg = self.cannot_add(&[*id], &name);
                    let e = EvalError::new(ErrKind::Compile, msg, Some(span.shrink_to_lo()));
                    self.errors.push(note(e));
                }
            }
        }
    }

    /// The names a config literal sets (see `config_attrs`), with those of the literals it
    /// unpacks (`**name` of a variable holding one, `**{...}`), as upstream's dict type of it
    /// keeps them; false when some key is of another kind.
    fn unpacked_config_attrs<'e>(
        &mut self,
        env: &Env,
        entries: &'e [ast::ConfigEntry],
        out: &mut Vec<(Symbol, Span, Vec<EntryValue<'e>>)>,
        depth: u32,
        ifs: bool,
    ) -> bool
    where
        'a: 'e,
    {
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::Unpack { value, .. } if depth < 8 => {
                    let inner = match &strip_paren(value).kind {
                        ExprKind::Config(inner) => Some(&inner[..]),
                        _ => self.variable_config(env, value),
                    };
                    match inner {
                        Some(inner)
                            if self.unpacked_config_attrs(env, inner, out, depth + 1, ifs) => {}
                        _ => return false,
                    }
                }
                // (`ifs`: a nested `if` without `else` sets its body's keys)
                ast::ConfigEntryKind::If(ci) if ifs && depth < 8 && ci.orelse.is_empty() => {
                    if !self.unpacked_config_attrs(env, &ci.body, out, depth + 1, ifs) {
                        return false;
                    }
                }
                _ => match config_attrs(std::slice::from_ref(en)) {
                    Some(attrs) => {
                        for (name, at, vals) in attrs {
                            match out.iter_mut().find(|(n, ..)| *n == name) {
                                Some((_, _, vs)) => vs.extend(vals),
                                None => out.push((name, at, vals)),
                            }
                        }
                    }
                    None => return false,
                },
            }
        }
        true
    }

    /// The config literal a package-level name holds (through names holding names), when the
    /// checker types the name by that value.
    pub(super) fn variable_config(
        &mut self,
        env: &Env,
        v: &Expr,
    ) -> Option<&'a [ast::ConfigEntry]> {
        let mut cur = strip_paren(v);
        for _ in 0..8 {
            let ExprKind::Ident(s) = cur.kind else {
                return None;
            };
            if env.locals.iter().any(|(n, _)| *n == s)
                || !matches!(self.lookup(env, s), Ty::Dict(..))
            {
                return None;
            }
            let (e, _) = *self.pkgs[env.pkg].inferred.get(&s)?;
            match &strip_paren(e).kind {
                ExprKind::Config(entries) => return Some(entries),
                ExprKind::Ident(_) => cur = strip_paren(e),
                _ => return None,
            }
        }
        None
    }
}

/// The names a config literal's entries set, each with its first key's place and its values
/// (`None` when an entry has a key of another kind, an unpacking or a conditional).
fn config_attrs(entries: &[ast::ConfigEntry]) -> Option<Vec<(Symbol, Span, Vec<EntryValue<'_>>)>> {
    let mut out: Vec<(Symbol, Span, Vec<EntryValue<'_>>)> = Vec::new();
    for en in entries {
        let ast::ConfigEntryKind::KeyValue { key, value, .. } = &en.kind else {
            return None;
        };
        push_entry_value(&mut out, key, value)?;
    }
    Some(out)
}

/// The value of the entry `key = value` added to its name's values (a key path's value as the
/// nested literal upstream makes of it); the name, or `None` for a key of another kind.
fn push_entry_value<'e>(
    out: &mut Vec<(Symbol, Span, Vec<EntryValue<'e>>)>,
    key: &Expr,
    value: &'e Expr,
) -> Option<Symbol> {
    let path = key_path(key)?;
    let (name, at) = path[0];
    let v = if path.len() > 1 {
        EntryValue::Nested(path[1..].to_vec(), value)
    } else {
        EntryValue::Expr(value)
    };
    match out.iter_mut().find(|(n, ..)| *n == name) {
        Some((_, _, vals)) => vals.push(v),
        None => out.push((name, at, vec![v])),
    }
    Some(name)
}

/// Whether a schema instance type is somewhere in `t` (through lists, dict values, unions).
fn has_schema(t: &Ty) -> bool {
    match t {
        Ty::Schema(_) => true,
        Ty::List(e) => has_schema(e),
        Ty::Dict(_, v) => has_schema(v),
        Ty::Union(ts) => ts.iter().any(has_schema),
        _ => false,
    }
}

/// Whether a config `if` entry's `else` entries are an `elif` (upstream checks the keys of an
/// `if` without `else` once more as a whole, but not those of an `elif`).
pub(super) fn is_elif(orelse: &[ast::ConfigEntry]) -> bool {
    matches!(orelse, [e] if matches!(e.kind, ast::ConfigEntryKind::If(_)))
}
