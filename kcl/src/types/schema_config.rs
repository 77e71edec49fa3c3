//! A config literal against the schema (or the schemas of a union) it instantiates: each
//! entry's key is a member (or a path `a.b.c` through members and dict values), its value
//! fits the member's type, and `if` entries and `**` operands are checked the same way.

use super::fit::schema_ids;
use super::whole::{IfWant, is_elif};
use super::*;

impl<'a> Checker<'a> {
    /// Whether none of the schemas `ids` has `name` (nor takes it by an index signature, an
    /// unknown parent or a mixin).
    fn no_member_named(&mut self, name: Symbol, ids: &[SchemaId]) -> bool {
        for id in ids {
            let m = self.members(*id);
            if m.open || m.attrs.contains_key(&name) {
                return false;
            }
        }
        true
    }

    /// Entries of a config literal used as the config of a schema (or a union of schemas).
    pub(super) fn check_schema_config(
        &mut self,
        env: &Env,
        entries: &[ast::ConfigEntry],
        ids: &[SchemaId],
    ) {
        let env = &self.config_env(env, entries);
        for en in entries {
            match &en.kind {
                ast::ConfigEntryKind::KeyValue { key, op, value } => {
                    // (a loop variable's name no schema has is refused as a member first)
                    if let ExprKind::Ident(s) = &key.kind
                        && env.loop_var_ty(*s).is_some()
                        && !self.no_member_named(*s, ids)
                        && self.loop_var_key(env, key, *op, value)
                    {
                        continue;
                    }
                    // `name[0] = v`: upstream's resolver checks `v` against the attribute's
                    // type, as if it replaced the whole attribute
                    let path = key_path(key).or_else(|| match &key.kind {
                        ExprKind::Subscript { value, index, .. }
                            if super::infer::number_literal(index) =>
                        {
                            value.name_path()
                        }
                        _ => None,
                    });
                    let Some(path) = path else {
                        let t = self.infer_config_key(env, key);
                        self.check_str_key(&t, key.span.shrink_to_lo(), false);
                        let t = self.infer(env, value);
                        self.check_insert(*op, &t, value.span);
                        continue;
                    };
                    let mut cur: Vec<SchemaId> = ids.to_vec();
                    let mut mixed_here = self.mixed_union;
                    // a dict's value type: the next name is one of its keys
                    let mut dict_value: Option<Ty> = None;
                    let mut found: Option<(Ty, Span)> = None;
                    // (the type found last comes from an index signature: upstream notes no
                    // declaration)
                    let mut by_sig = false;
                    let mut ok = true;
                    let mut parent_schema_at: Option<Span> = None;
                    for (i, (name, nspan)) in path.iter().enumerate() {
                        // (the last name is an attribute of a schema the name before it has)
                        if i > 0 && i + 1 == path.len() && dict_value.is_none() && !cur.is_empty() {
                            parent_schema_at = Some(path[i - 1].1);
                        }
                        if let Some(v) = dict_value.take() {
                            let def = found.as_ref().map_or(*nspan, |f| f.1);
                            (cur, dict_value, mixed_here) = Self::path_step(&v);
                            found = Some((v, def));
                            continue;
                        }
                        if cur.is_empty() {
                            ok = false;
                            break;
                        }
                        let mut hit: Option<(Ty, Span)> = None;
                        let mut open = false;
                        for &id in &cur {
                            let m = self.members(id);
                            open |= m.open;
                            if let Some(a) = m.attrs.get(name) {
                                hit = Some(a.clone());
                                break;
                            }
                        }
                        match hit {
                            Some(h) => {
                                // the schema's own index signature of string-literal keys
                                // refuses any other key upstream, a declared attribute's too
                                // (its value is still checked against the attribute)
                                if let [id] = cur.as_slice()
                                    && self.schemas[id.0].stmt.index_signature.is_some()
                                    && !self.sig_takes_key(*id, *name)
                                {
                                    let msg = self.cannot_add(&cur, name);
                                    let sp = if i == 0 { key.span } else { *nspan };
                                    self.err(ErrKind::Compile, msg, sp.shrink_to_lo());
                                }
                                (cur, dict_value, mixed_here) = Self::path_step(&h.0);
                                found = Some(h);
                                by_sig = false;
                            }
                            // a key the schema's index signature takes: its value type
                            None if open => {
                                let sig = match cur.as_slice() {
                                    [id] => {
                                        let info = &self.schemas[id.0];
                                        info.stmt
                                            .index_signature
                                            .as_ref()
                                            .map(|s| (s, info.pkg, info.file))
                                    }
                                    _ => None,
                                };
                                let Some((sig, pkg, file)) = sig else {
                                    ok = false;
                                    break;
                                };
                                if !self.sig_takes_key(cur[0], *name) {
                                    let msg = self.cannot_add(&cur, name);
                                    let sp = if i == 0 { key.span } else { *nspan };
                                    self.err(ErrKind::Compile, msg, sp.shrink_to_lo());
                                    ok = false;
                                    break;
                                }
                                let t = self.resolve_type(pkg, file, &sig.value_ty);
                                (cur, dict_value, mixed_here) = Self::path_step(&t);
                                found = Some((t, sig.span));
                                by_sig = true;
                            }
                            None => {
                                let mixed = std::mem::replace(&mut self.mixed_union, mixed_here);
                                let msg = self.cannot_add(&cur, name);
                                self.mixed_union = mixed;
                                let sp = if i == 0 { key.span } else { *nspan };
                                self.err(ErrKind::Compile, msg, sp.shrink_to_lo());
                                ok = false;
                                break;
                            }
                        }
                        if i + 1 < path.len()
                            && !matches!(
                                found,
                                Some((Ty::Schema(_) | Ty::Union(_) | Ty::Dict(..), _))
                            )
                        {
                            // `a.b = v` where `a` takes no config: upstream's resolver
                            // checks the dict `{b: v}` against `a`'s type, at `a`
                            if let Some((t, def)) = found.clone()
                                && !t.is_any()
                            {
                                // (the value's own errors come once, below)
                                let before = self.errors.len();
                                let mut got = self.infer(env, value);
                                self.errors.truncate(before);
                                for (n, _) in path[i + 1..].iter().rev() {
                                    let k = Ty::StrLit(std::sync::Arc::from(n.as_str()));
                                    got = Ty::Dict(Rc::new(k), Rc::new(got));
                                }
                                self.fits(&got, &t, *nspan, (!by_sig).then_some(def));
                            }
                            ok = false;
                            break;
                        }
                    }
                    // upstream reports a value of the wrong type at the last name of the path
                    let at = path.last().map_or(key.span, |(_, sp)| *sp);
                    match found {
                        Some((t, def)) if ok && *op != ast::ConfigOp::Insert => {
                            self.check_value(env, value, &t, at, (!by_sig).then_some(def));
                            let before = self.errors.len();
                            self.check_parts(env, value, &t, at);
                            self.drop_repeated_errors(before);
                            self.check_path_whole(env, value, &t, def, parent_schema_at);
                        }
                        // a list literal appended to a list of schemas: its configs are
                        // checked against the schema
                        Some((t, def))
                            if ok
                                && matches!(&t, Ty::List(et) if matches!(**et, Ty::Schema(_)))
                                && matches!(strip_paren(value).kind, ExprKind::List(_)) =>
                        {
                            self.check_value(env, value, &t, at, Some(def));
                        }
                        // `+=`: upstream checks the value's config literals against the
                        // attribute's type, then the whole value, then that it is a list
                        Some((t, def)) if ok => {
                            self.check_value(env, value, &t, at, (!by_sig).then_some(def));
                            let got = self.infer(env, value);
                            let fits = self.fits(&got, &t, at, (!by_sig).then_some(def));
                            self.check_insert(*op, &got, value.span);
                            if !fits {
                                self.check_path_whole(env, value, &t, def, parent_schema_at);
                            }
                        }
                        _ => {
                            let t = self.infer(env, value);
                            self.check_insert(*op, &t, value.span);
                        }
                    }
                }
                ast::ConfigEntryKind::Unpack { value: v, .. } => {
                    // upstream's config context reaches the config literals of the unpacked
                    // expression (through parentheses, `as`, conditionals and operators)
                    let want = match ids {
                        [id] => Ty::Schema(*id),
                        _ => Ty::union(ids.iter().map(|&id| Ty::Schema(id)).collect()),
                    };
                    let mixed = self.mixed_union;
                    self.check_operand_configs(env, v, &want, None);
                    self.mixed_union = mixed;
                    self.infer_unpacked(env, v);
                    if let [id] = ids {
                        self.check_unpacked_attrs(env, v, *id);
                    }
                }
                ast::ConfigEntryKind::If(ci) => {
                    // upstream checks config literals in the condition against the schemas
                    let want = match ids {
                        [id] => Ty::Schema(*id),
                        _ => Ty::union(ids.iter().map(|&id| Ty::Schema(id)).collect()),
                    };
                    let mixed = self.mixed_union;
                    self.check_operand_configs(env, &ci.cond, &want, None);
                    self.mixed_union = mixed;
                    self.infer(env, &ci.cond);
                    let elif = std::mem::take(&mut self.config_elif);
                    self.check_schema_config(env, &ci.body, ids);
                    self.config_elif = is_elif(&ci.orelse);
                    self.check_schema_config(env, &ci.orelse, ids);
                    self.config_elif = false;
                    if let ([id], true) = (ids, ci.orelse.is_empty() && !elif) {
                        self.check_if_entry_whole(
                            env,
                            en.span(),
                            &ci.body,
                            IfWant::Schema(*id),
                            None,
                        );
                    }
                }
            }
        }
    }

    /// What the next name of a config key path `a.b.c` selects in a value of type `t`: an
    /// attribute of one of these schemas, or a key of a dict with this value type.
    /// A union's schemas count when no member takes a config as it is (no dict): upstream
    /// then names the schema of a mixed union as `'schema A'` (`mixed`).
    fn path_step(t: &Ty) -> (Vec<SchemaId>, Option<Ty>, bool) {
        match t {
            Ty::Dict(_, v) => (Vec::new(), Some((**v).clone()), false),
            t => match schema_ids(t) {
                Some((ids, mixed)) => (ids, None, mixed),
                None => (Vec::new(), None, false),
            },
        }
    }
}
