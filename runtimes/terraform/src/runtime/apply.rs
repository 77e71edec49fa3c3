//! Managed resources: plan and apply (create, update, replace with create-before-destroy and
//! deposed objects), the crash journal of creates in flight and adopting what an interrupted
//! create left, and deletes.

use super::*;

impl Inner {
    /// Whether a dry-run may answer "no change" without PlanResourceChange: this operation's
    /// read found the live object equal to the recorded state, and that state was applied from
    /// exactly these inputs (provider binary, provider configuration, schema version, resource
    /// configuration). The provider's plan of an object it produced from this configuration,
    /// unchanged since, is that same object (Terraform shows no change) unless the provider's
    /// plan consults something beyond its inputs (a remote lookup or the clock in a
    /// CustomizeDiff) or never converges (a perpetual diff, a provider bug). `alwaysPlan`
    /// turns the shortcut off for such providers.
    pub(super) fn unchanged_since_apply(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &Resource,
        private: Option<&str>,
        config: &Json,
    ) -> bool {
        if self.settings().always_plan {
            return false;
        }
        let Some(envelope) = PrivateEnvelope::parse(private) else {
            return false;
        };
        if envelope.applied_from.is_empty()
            || envelope.applied_from != applied_from(instance, target, schema, config)
        {
            return false;
        }
        let fingerprint = state_fingerprint(&prior.attributes);
        self.refreshed_unchanged
            .lock()
            .is_ok_and(|map| map.get(&target.id) == Some(&fingerprint))
    }

    /// The prior state as msgpack of the current schema, and the provider's private bytes.
    /// State written with the current schema version is encoded locally; anything else goes
    /// through UpgradeResourceState.
    pub(super) async fn prior_state(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &Resource,
        private: Option<&str>,
        force_upgrade: bool,
    ) -> PluginResult<(Vec<u8>, Vec<u8>)> {
        let (version, private) =
            PrivateEnvelope::decode(private).unwrap_or((schema.version, Vec::new()));
        let mut attributes = prior.attributes.clone();
        attributes.remove(DEPOSED_ATTRIBUTE);
        let json = Json::Object(attributes);
        if !force_upgrade && version == schema.version {
            // State that no longer fits the schema (e.g. recorded without a private envelope by
            // another provider version) is left to the provider's upgrade logic below.
            match schema.block.encode(&json, false) {
                Ok(mp) => return Ok((cty::to_bytes(&mp), private)),
                Err(e) => {
                    tracing::debug!(resource = %target.id, "prior state needs an upgrade: {e}")
                }
            }
        }
        let raw = serde_json::to_vec(&json).map_err(|e| err(ErrorKind::Internal, &target.id, e))?;
        let (upgraded, diags) = instance
            .provider
            .upgrade_state(&target.type_name, version, raw)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        check_diags(&target.id, "upgrading the prior state", &diags)?;
        Ok((upgraded, private))
    }

    pub(super) async fn apply(&self, req: ApplyRequest) -> PluginResult<ApplyResponse> {
        if is_data(&req.planned) {
            return self.apply_data(&req).await;
        }
        let target = Target::of(&req.planned)?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let id = target.id.as_str();
        let mut deposed = PrivateEnvelope::deposed_of(req.prior_private.as_deref());
        if !req.dry_run && !deposed.is_empty() {
            // Objects left over from an earlier replacement go first; while one cannot be
            // deleted the apply fails and the state keeps recording it.
            let template = req.prior.as_ref().unwrap_or(&req.planned);
            deposed = self
                .destroy_deposed(&instance, &target, &schema, template, deposed)
                .await?;
        }
        let config_json = Json::Object(req.planned.attributes.clone());
        if req.dry_run
            && let Some(prior) = &req.prior
            && self.unchanged_since_apply(
                &instance,
                &target,
                &schema,
                prior,
                req.prior_private.as_deref(),
                &config_json,
            )
        {
            let mut attributes = prior.attributes.clone();
            attributes.remove(DEPOSED_ATTRIBUTE);
            let json = Json::Object(attributes);
            return Ok(ApplyResponse {
                sensitive_paths: schema.block.sensitive_paths(&json),
                resource: resource_from(&req.planned, json),
                private: req.prior_private.clone(),
                unknown_paths: Vec::new(),
                requires_replace: Vec::new(),
            });
        }
        let config = schema
            .block
            .encode_config(&config_json, req.dry_run)
            .map_err(|e| err(ErrorKind::InvalidInput, id, e))?;
        let config = cty::to_bytes(&config);
        let refreshed = match &req.prior {
            Some(p) => Some(
                self.refreshed_prior(&instance, &target, &schema, p, req.prior_private.as_deref())
                    .await?,
            ),
            None => None,
        };
        // Recorded but gone from the cloud: created anew, as Terraform does after a refresh.
        let mut creating = !matches!(refreshed, Some(Some(_)));
        let (mut prior, mut prior_private) =
            refreshed.flatten().unwrap_or_else(|| (nil(), Vec::new()));
        let intent = self.intent_path(&target);
        let adopting = req.planned.extension_str(IMPORT_ID).is_some();
        if creating && (adopting || (!req.dry_run && intent.exists())) {
            // Brownfield adoption (an import ID names an existing object), or an earlier create
            // of this resource was interrupted (the provider died mid-apply) so the object may
            // exist unrecorded: plan from the existing object instead of creating a new one.
            if let Some((state, private)) = self
                .adopt(&instance, &target, &schema, &req.planned)
                .await?
            {
                tracing::info!(resource = id, "planning from the existing object (adopted)");
                (prior, prior_private, creating) = (state, private, false);
            }
        }
        let mut plan = self
            .plan(
                &instance,
                &target,
                &schema,
                &prior,
                &config_json,
                &config,
                &prior_private,
                req.dry_run,
            )
            .await?;
        if creating {
            // Providers may name replace-forcing attributes on a create; nothing is replaced then.
            plan.requires_replace.clear();
        }
        if req.dry_run {
            let decoded = decode_state(id, &schema, &plan.planned_state)?.ok_or_else(|| {
                err(
                    ErrorKind::Rejected,
                    id,
                    "the provider planned no object for a resource that should exist",
                )
            })?;
            return Ok(ApplyResponse {
                resource: resource_from(&req.planned, decoded.json),
                private: req.prior_private.clone(),
                sensitive_paths: decoded.sensitive,
                unknown_paths: decoded.unknown,
                requires_replace: plan
                    .requires_replace
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            });
        }
        // With create-before-destroy, the object being replaced, deleted once its successor
        // exists.
        let mut replaced = None;
        if !plan.requires_replace.is_empty() {
            // The provider's plan decides only *that* a replace is needed: the new object is
            // planned from nothing. By default the old object goes first (names that must be
            // unique can be reused); with createBeforeDestroy both coexist for a moment.
            let old = (
                std::mem::replace(&mut prior, nil()),
                std::mem::take(&mut prior_private),
            );
            if create_before_destroy(&req.planned) {
                replaced = Some(old);
            } else {
                self.destroy(&instance, &target, old.0, old.1).await?;
            }
            creating = true;
            plan = self
                .plan(
                    &instance,
                    &target,
                    &schema,
                    &prior,
                    &config_json,
                    &config,
                    &[],
                    false,
                )
                .await?;
        }
        if !creating && replaced.is_none() {
            // Nothing to change (the kernel saw a difference the provider does not plan for,
            // e.g. deposed objects now deleted): like Terraform's no-op, apply nothing.
            let before = decode_state(id, &schema, &prior)?;
            let after = decode_state(id, &schema, &plan.planned_state)?;
            if let (Some(before), Some(after)) = (before, after)
                && before.json == after.json
                && after.unknown.is_empty()
            {
                let _ = std::fs::remove_file(&intent);
                return Ok(ApplyResponse {
                    resource: resource_from(&req.planned, after.json),
                    private: Some(PrivateEnvelope::full(
                        schema.version,
                        &prior_private,
                        Vec::new(),
                        applied_from(&instance, &target, &schema, &config_json),
                    )),
                    sensitive_paths: after.sensitive,
                    unknown_paths: Vec::new(),
                    requires_replace: Vec::new(),
                });
            }
        }
        if creating {
            // Journal the create so a re-run after a crash adopts instead of duplicating.
            if let Err(e) = schema_cache::write_atomic(&intent, id.as_bytes()) {
                tracing::warn!(resource = id, "could not record the create intent: {e}");
            }
        }
        let config_again = config.clone();
        let result = instance
            .provider
            .apply(
                &target.type_name,
                prior,
                plan.planned_state,
                config,
                plan.planned_private,
            )
            .await
            .map_err(|e| rpc_error(id, e));
        let result = match result {
            Ok(r) => r,
            Err(e) if creating => {
                let hint =
                    "the object may have been created; the next apply of this resource adopts it";
                return Err(PluginError::new(e.kind, format!("{} ({hint})", e.message)));
            }
            Err(e) => return Err(e),
        };
        // The provider answered. A failed create that still returned an object (created, but a
        // later step failed) keeps its journal entry so the re-run adopts that object.
        let partial = result.diagnostics.iter().any(|d| d.error)
            && !cty::from_bytes(&result.state).is_ok_and(|v| v.is_nil());
        if !partial {
            let _ = std::fs::remove_file(&intent);
        }
        check_diags(id, "applying", &result.diagnostics)?;
        let decoded = decode_state(id, &schema, &result.state)?.ok_or_else(|| {
            err(
                ErrorKind::Rejected,
                id,
                "the provider returned no object after apply",
            )
        })?;
        if !decoded.unknown.is_empty() {
            return Err(err(
                ErrorKind::Internal,
                id,
                format!(
                    "the provider left unknown values after apply: {}",
                    decoded.unknown.join(", ")
                ),
            ));
        }
        if let Some((old, old_private)) = replaced {
            // The new object exists and must be recorded; an old object that cannot be deleted
            // is recorded beside it as deposed, shown by the next preview and deleted by the
            // next apply or destroy.
            let old_json = decode_state(id, &schema, &old)?.map(|d| d.json);
            if let Err(e) = self
                .destroy(&instance, &target, old, old_private.clone())
                .await
            {
                let state = match old_json {
                    Some(Json::Object(map)) => map,
                    _ => Map::new(),
                };
                let object = DeposedObject {
                    schema_version: schema.version,
                    state,
                    private: B64.encode(&old_private),
                };
                tracing::warn!(
                    resource = id,
                    deposed = %object.label(deposed.len()),
                    "the replacement was created, but deleting the object it replaces failed; it is recorded as deposed and the next apply retries: {}",
                    e.message
                );
                deposed.push(object);
            }
        }
        // A later dry-run may skip planning only if planning this configuration over the
        // object just made shows no change. Where the apply does not converge (the API drops
        // or rewrites a configured value), every preview plans, as terraform's does, and shows
        // the difference.
        let converged = self
            .plan(
                &instance,
                &target,
                &schema,
                &result.state,
                &config_json,
                &config_again,
                &result.private,
                false,
            )
            .await
            .ok()
            .filter(|p| p.requires_replace.is_empty())
            .and_then(|p| decode_state(id, &schema, &p.planned_state).ok().flatten())
            .is_some_and(|p| p.unknown.is_empty() && p.json == decoded.json);
        if !converged {
            tracing::debug!(
                resource = id,
                "the applied object plans a further change; previews of it will always plan"
            );
        }
        let stamp = if converged {
            applied_from(&instance, &target, &schema, &config_json)
        } else {
            String::new()
        };
        let mut resource = resource_from(&req.planned, decoded.json);
        mark_deposed(&mut resource, &deposed);
        Ok(ApplyResponse {
            resource,
            private: Some(PrivateEnvelope::full(
                schema.version,
                &result.private,
                deposed,
                stamp,
            )),
            sensitive_paths: decoded.sensitive,
            unknown_paths: Vec::new(),
            requires_replace: plan
                .requires_replace
                .iter()
                .map(ToString::to_string)
                .collect(),
        })
    }

    pub(super) fn intent_path(&self, target: &Target) -> PathBuf {
        let key = hex::encode(Sha256::digest(format!("{}\0{}", target.address, target.id)));
        self.settings().intent_dir.join(key)
    }

    /// Find the object an interrupted create may have left: import it by the explicit import
    /// ID, else by the identifying name in its configuration (`name`, or the attribute named
    /// like the type's last word: `bucket` for `aws_s3_bucket`), then read it.
    pub(super) async fn adopt(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        planned: &Resource,
    ) -> PluginResult<Option<(Vec<u8>, Vec<u8>)>> {
        let suffix = target.type_name.rsplit('_').next().unwrap_or_default();
        let candidate = planned
            .extension_str(IMPORT_ID)
            .or_else(|| planned.attributes.get("name").and_then(Json::as_str))
            .or_else(|| planned.attributes.get(suffix).and_then(Json::as_str));
        let Some(import_id) = candidate else {
            return Ok(None);
        };
        let imported = instance
            .provider
            .import(&target.type_name, import_id)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        if imported.diagnostics.iter().any(|d| d.error) {
            return Ok(None);
        }
        let Some((_, state, private)) = imported
            .resources
            .into_iter()
            .find(|(t, _, _)| t == &target.type_name)
        else {
            return Ok(None);
        };
        let read = instance
            .provider
            .read(&target.type_name, state, private)
            .await
            .map_err(|e| rpc_error(&target.id, e))?;
        if read.diagnostics.iter().any(|d| d.error)
            || decode_state(&target.id, schema, &read.state)?.is_none()
        {
            return Ok(None);
        }
        Ok(Some((read.state, read.private)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn plan(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &[u8],
        config_json: &Json,
        config: &[u8],
        prior_private: &[u8],
        allow_unknown: bool,
    ) -> PluginResult<plugin::PlanResult> {
        let id = target.id.as_str();
        let prior_json = match decode_state(id, schema, prior)? {
            Some(d) => d.json,
            None => Json::Null,
        };
        let proposed = schema.block.proposed_new(&prior_json, config_json);
        let proposed = schema
            .block
            .encode(&proposed, allow_unknown)
            .map_err(|e| err(ErrorKind::InvalidInput, id, e))?;
        let plan = instance
            .provider
            .plan(
                &target.type_name,
                prior.to_vec(),
                cty::to_bytes(&proposed),
                config.to_vec(),
                prior_private.to_vec(),
            )
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "planning", &plan.diagnostics)?;
        Ok(plan)
    }

    /// Plan to null, then apply: how a provider deletes.
    pub(super) async fn destroy(
        &self,
        instance: &Instance,
        target: &Target,
        prior: Vec<u8>,
        private: Vec<u8>,
    ) -> PluginResult<()> {
        let id = target.id.as_str();
        let plan = instance
            .provider
            .plan(&target.type_name, prior.clone(), nil(), nil(), private)
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "planning the delete", &plan.diagnostics)?;
        let result = instance
            .provider
            .apply(&target.type_name, prior, nil(), nil(), plan.planned_private)
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "deleting", &result.diagnostics)
    }

    /// Delete deposed objects: each is read first (one already gone is simply forgotten), then
    /// planned to null and applied. Fails naming every object that could not be deleted; they
    /// stay recorded in the state the kernel keeps on failure.
    pub(super) async fn destroy_deposed(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        template: &Resource,
        deposed: Vec<DeposedObject>,
    ) -> PluginResult<Vec<DeposedObject>> {
        let mut failures = Vec::new();
        for (i, object) in deposed.iter().enumerate() {
            let label = object.label(i);
            let mut resource = template.clone();
            resource.attributes = object.state.clone();
            let private = serde_json::to_string(&PrivateEnvelope {
                schema_version: object.schema_version,
                private: object.private.clone(),
                deposed: Vec::new(),
                applied_from: String::new(),
            })
            .ok();
            let attempt = async {
                let (state, private) = self
                    .prior_state(
                        instance,
                        target,
                        schema,
                        &resource,
                        private.as_deref(),
                        false,
                    )
                    .await?;
                let live = instance
                    .provider
                    .read(&target.type_name, state, private)
                    .await
                    .map_err(|e| rpc_error(&target.id, e))?;
                check_diags(&target.id, "reading the deposed object", &live.diagnostics)?;
                if cty::from_bytes(&live.state).is_ok_and(|v| v.is_nil()) {
                    return Ok(());
                }
                self.destroy(instance, target, live.state, live.private)
                    .await
            };
            if let Err(e) = attempt.await {
                failures.push(format!("{label}: {}", e.message));
            }
        }
        if failures.is_empty() {
            return Ok(Vec::new());
        }
        Err(err(
            ErrorKind::Rejected,
            &target.id,
            format!(
                "deleting the deposed object(s) a create-before-destroy replacement left failed (they stay recorded; the next apply or destroy retries): {}",
                failures.join("; ")
            ),
        ))
    }

    pub(super) async fn delete(&self, req: DeleteRequest) -> PluginResult<()> {
        if is_data(&req.resource) {
            // A data source owns nothing: forgetting it is all a delete means.
            return Ok(());
        }
        let target = Target::of(&req.resource)?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let (prior, private) = self
            .prior_state(
                &instance,
                &target,
                &schema,
                &req.resource,
                req.private.as_deref(),
                false,
            )
            .await?;
        let deposed = PrivateEnvelope::deposed_of(req.private.as_deref());
        if !deposed.is_empty() {
            self.destroy_deposed(&instance, &target, &schema, &req.resource, deposed)
                .await?;
        }
        self.destroy(&instance, &target, prior, private).await
    }
}
