//! What a package outputs: its public globals in first-assignment order, or the values of its
//! top-level expression statements (documents).

use super::*;

impl Evaluator {
    /// Top-level expression values merged into one document (`None` when there are none).
    pub fn expr_output(&self, pkg: &Rc<Pkg>) -> EvalResult<Option<Value>> {
        let ex = pkg.exprs.borrow();
        // upstream shows a value as JSON (`true`, `"s"`), a config or list by its brackets
        let show = |x: &Value| {
            if x.is_config() {
                "{...}".to_string()
            } else if matches!(x, Value::List(_)) {
                "[...]".to_string()
            } else {
                crate::value::json::to_json(x).to_string()
            }
        };
        // the expression values merge first, in order; the public globals' document last.
        // (upstream merges them when the program has run: its runtime stands where it
        // walked last)
        let end = |sp: &Span| self.walked_point(*sp);
        let mut acc: Option<Value> = None;
        for (v, sp) in ex.iter() {
            acc = Some(match acc {
                None => v.clone(),
                // a None document merges as nothing (alone it is `null`)
                Some(a) if matches!(v, Value::None) => a,
                Some(Value::None) => v.clone(),
                Some(a) => {
                    // configs merge; anything else (lists included) must be equal
                    if !(a.is_config() && v.is_config()) && a != *v {
                        return Err(EvalError::new(
                            ErrKind::Evaluation,
                            format!("conflicting values between {} and {}", show(v), show(&a)),
                            Some(end(sp)),
                        ));
                    }
                    crate::value::union(&a, v, false).map_err(|e| self.rt(e, end(sp)))?
                }
            });
        }
        // (any public name but a schema's or a rule's)
        let outputs = |s: &Symbol| {
            !s.as_str().starts_with('_')
                && pkg
                    .globals
                    .borrow()
                    .get(s)
                    .is_none_or(|v| super::schema::as_schema_type(v).is_none())
        };
        if let (Some(a), Some((_, sp))) = (&acc, ex.last())
            && !a.is_config()
            // (None documents merge as nothing with the globals' document too)
            && !matches!(a, Value::None)
            // (a public name set in a branch not taken counts too: upstream's scope has it)
            && (pkg.order.borrow().iter().any(outputs) || pkg.setters.keys().any(outputs))
        {
            return Err(EvalError::new(
                ErrKind::Evaluation,
                format!("conflicting values between {{...}} and {}", show(a)),
                Some(end(sp)),
            ));
        }
        Ok(acc)
    }

    /// The package's output: top-level public values in order.
    pub fn pkg_output(&self, pkg: &Rc<Pkg>, show_hidden: bool) -> crate::value::Dict {
        let mut d = crate::value::Dict::new();
        let g = pkg.globals.borrow();
        // statement order, whatever order the lazy evaluation assigned them in
        let mut names: Vec<Symbol> = pkg.order.borrow().clone();
        names.sort_by_key(|s| {
            pkg.setters
                .get(s)
                .and_then(|v| v.first().map(|x| x.stmt))
                .unwrap_or(usize::MAX)
        });
        for sym in names.iter() {
            let name = sym.as_str();
            if name.starts_with('_') && !show_hidden {
                continue;
            }
            if let Some(v) = g.get(sym) {
                if matches!(v, Value::Func(_)) {
                    continue;
                }
                d.map.insert(Str::from(name), v.clone());
            }
        }
        d
    }
}
