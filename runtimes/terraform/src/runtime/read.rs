//! Reading managed resources: ReadResource against the recorded state, the refresh a plan starts
//! from, and what a read found remembered for the apply of the same operation.

use super::*;

impl Inner {
    pub(super) async fn read(&self, req: ReadRequest) -> PluginResult<ReadResponse> {
        if let Some(resource) = req.planned.as_ref().or(req.prior.as_ref())
            && is_data(resource)
        {
            return self.read_data(&req).await;
        }
        let Some(prior) = &req.prior else {
            // Nothing recorded: only an import ID can name an existing object to show.
            return match &req.planned {
                Some(planned) if planned.extension_str(IMPORT_ID).is_some() => {
                    self.import(ImportRequest {
                        planned: planned.clone(),
                        import_id: None,
                        timeout: None,
                    })
                    .await
                }
                _ => Ok(ReadResponse::default()),
            };
        };
        let target = Target::of(prior)?;
        let (instance, schema) = self.resource_schema(&target).await?;
        let (state, private) = self
            .prior_state(
                &instance,
                &target,
                &schema,
                prior,
                req.prior_private.as_deref(),
                false,
            )
            .await?;
        let (mut response, raw) = self
            .refresh(&instance, &target, &schema, prior, state, private)
            .await?;
        let fingerprint = state_fingerprint(&prior.attributes);
        let unchanged = response
            .resource
            .as_ref()
            .is_some_and(|live| state_fingerprint(&live.attributes) == fingerprint);
        if let Ok(mut map) = self.refreshed_unchanged.lock() {
            if unchanged {
                map.insert(target.id.clone(), fingerprint.clone());
            } else {
                map.remove(&target.id);
            }
        }
        if let Ok(mut map) = self.refreshed_drifted.lock() {
            if unchanged {
                map.remove(&target.id);
            } else {
                map.insert(target.id.clone(), (fingerprint, raw));
            }
        }
        // Deposed objects and the apply fingerprint belong to the resource, not to one read.
        let recorded = PrivateEnvelope::parse(req.prior_private.as_deref()).unwrap_or_default();
        if !recorded.deposed.is_empty() || !recorded.applied_from.is_empty() {
            // The live object carries the marker so a preview shows the pending deletes.
            if let Some(resource) = response.resource.as_mut() {
                mark_deposed(resource, &recorded.deposed);
            }
            let (version, bytes) = PrivateEnvelope::decode(response.private.as_deref())
                .unwrap_or((schema.version, Vec::new()));
            response.private = Some(PrivateEnvelope::full(
                version,
                &bytes,
                recorded.deposed,
                recorded.applied_from,
            ));
        }
        Ok(response)
    }

    /// ReadResource: the live object, and the provider's own encoding of it (`None`: gone).
    pub(super) async fn refresh(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        template: &Resource,
        state: Vec<u8>,
        private: Vec<u8>,
    ) -> PluginResult<(ReadResponse, Option<RawState>)> {
        let id = target.id.as_str();
        let result = instance
            .provider
            .read(&target.type_name, state, private)
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "reading", &result.diagnostics)?;
        Ok(match decode_state(id, schema, &result.state)? {
            None => (ReadResponse::default(), None),
            Some(d) => (
                ReadResponse {
                    resource: Some(resource_from(template, d.json)),
                    private: Some(PrivateEnvelope::encode(schema.version, &result.private)),
                    sensitive_paths: d.sensitive,
                },
                Some((result.state, result.private)),
            ),
        })
    }

    /// The object a plan starts from: the live one, as Terraform refreshes before planning, so
    /// drift is planned away rather than planned from the recorded state (which would plan no
    /// change and apply nothing). This operation's read answers it when it was made for this
    /// recorded state; otherwise the provider reads it now. `None`: the object is gone.
    pub(super) async fn refreshed_prior(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        prior: &Resource,
        private: Option<&str>,
    ) -> PluginResult<Option<RawState>> {
        let (state, private) = self
            .prior_state(instance, target, schema, prior, private, false)
            .await?;
        let fingerprint = state_fingerprint(&prior.attributes);
        if self
            .refreshed_unchanged
            .lock()
            .is_ok_and(|map| map.get(&target.id) == Some(&fingerprint))
        {
            return Ok(Some((state, private)));
        }
        if let Ok(map) = self.refreshed_drifted.lock()
            && let Some((recorded, raw)) = map.get(&target.id)
            && *recorded == fingerprint
        {
            return Ok(raw.clone());
        }
        let (_, raw) = self
            .refresh(instance, target, schema, prior, state, private)
            .await?;
        Ok(raw)
    }
}
