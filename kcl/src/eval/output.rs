//! What a package outputs: its public globals in first-assignment order, or the values of its
//! top-level expression statements (documents).

use super::*;

impl Evaluator {
    /// Top-level expression values merged into one document (`None` when there are none).
    pub fn expr_output(&self, pkg: &Rc<Pkg>) -> EvalResult<Option<Value>> {
        let ex = pkg.exprs.borrow();
        if let Some((v, sp)) = ex.iter().find(|(v, _)| !v.is_config())
            && pkg
                .order
                .borrow()
                .iter()
                .any(|s| !s.as_str().starts_with('_'))
        {
            return Err(EvalError::new(
                ErrKind::Evaluation,
                // upstream shows the value as JSON (`true`, `"s"`)
                format!(
                    "conflicting values between {{...}} and {}",
                    if matches!(v, Value::List(_)) {
                        "[...]".to_string()
                    } else {
                        crate::value::json::to_json(v).to_string()
                    }
                ),
                Some(*sp),
            ));
        }
        let mut acc: Option<Value> = None;
        for (v, sp) in ex.iter() {
            acc = Some(match acc {
                None => v.clone(),
                Some(a) => {
                    // configs merge; anything else (lists included) must be equal
                    if !(a.is_config() && v.is_config()) && a != *v {
                        let show = |x: &Value| {
                            if x.is_config() {
                                "{...}".to_string()
                            } else if matches!(x, Value::List(_)) {
                                "[...]".to_string()
                            } else {
                                crate::value::json::to_json(x).to_string()
                            }
                        };
                        return Err(EvalError::new(
                            ErrKind::Evaluation,
                            format!("conflicting values between {} and {}", show(v), show(&a)),
                            Some(*sp),
                        ));
                    }
                    crate::value::union(&a, v, false).map_err(|e| self.rt(e, *sp))?
                }
            });
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
