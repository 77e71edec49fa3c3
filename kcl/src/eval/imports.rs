//! `import` statements: binding each import to its package (loaded and run on first use), a
//! system module or a plugin.

use super::*;

impl Evaluator {
    pub(super) fn resolve_imports(&self, pkg: &Rc<Pkg>) -> EvalResult<()> {
        if pkg.imports_done.replace(true) {
            return Ok(());
        }
        for (file, imp, span) in &pkg.import_stmts {
            let Some(local) = imp.local_name() else {
                continue;
            };
            let v = self.import(pkg, *file, imp, *span)?;
            pkg.imports.borrow_mut().insert((*file, local), v);
        }
        Ok(())
    }

    fn import(
        &self,
        _pkg: &Rc<Pkg>,
        _file: FileId,
        imp: &ast::ImportStmt,
        span: Span,
    ) -> EvalResult<Value> {
        let last = imp.names.last().map(|n| n.sym.as_str()).unwrap_or("");
        let modval = |m: ModuleRef| {
            Value::Func(Rc::new(crate::value::Func::User {
                name: Str::from(last),
                data: Rc::new(m),
                is_type: false,
            }))
        };
        match self.import_targets.get(&imp.path_span) {
            Some(ImportTarget::System(m)) => match crate::builtins::system_module_name(m) {
                Some(n) => Ok(modval(ModuleRef::System(n))),
                None => Err(EvalError::new(
                    ErrKind::Compile,
                    format!("unknown system module '{m}'"),
                    Some(span),
                )),
            },
            Some(ImportTarget::Plugin(p)) => Ok(modval(ModuleRef::Plugin(p.to_string()))),
            Some(ImportTarget::Package(path)) => {
                if let Some(p) = self.pkgs.borrow().get(&**path) {
                    return Ok(modval(ModuleRef::Pkg(p.clone())));
                }
                let src = self.sources.borrow_mut().remove(&**path);
                let Some((dir, modules)) = src else {
                    return Err(EvalError::new(
                        ErrKind::Compile,
                        format!("pkgpath {path} not found in the program"),
                        Some(span),
                    ));
                };
                let p = self.make_pkg(path, dir, modules)?;
                self.run_pkg(&p)?;
                Ok(modval(ModuleRef::Pkg(p)))
            }
            None => Err(EvalError::new(
                ErrKind::Compile,
                format!("pkgpath {} not found in the program", imp.path),
                Some(span),
            )),
        }
    }
}
