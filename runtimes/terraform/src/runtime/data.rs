//! Data sources (`extensions.mode: data`): read through ReadDataSource on apply and on read;
//! they change nothing.

use super::*;

impl Inner {
    /// ReadDataSource for a configuration: the data source's current attributes.
    pub(super) async fn read_data_source(
        &self,
        instance: &Instance,
        target: &Target,
        schema: &Schema,
        config: &Json,
    ) -> PluginResult<Decoded> {
        let id = target.id.as_str();
        let config = schema
            .block
            .encode_config(config, false)
            .map_err(|e| err(ErrorKind::InvalidInput, id, e))?;
        let result = instance
            .provider
            .read_data_source(&target.type_name, cty::to_bytes(&config))
            .await
            .map_err(|e| rpc_error(id, e))?;
        check_diags(id, "reading the data source", &result.diagnostics)?;
        decode_state(id, schema, &result.state)?
            .ok_or_else(|| err(ErrorKind::Rejected, id, "the provider read no data"))
    }

    /// A data source "applied": read it (also in a dry-run, reads change nothing). While its
    /// configuration still waits on other resources' values, a dry-run shows the attributes
    /// the provider computes as unknown.
    pub(super) async fn apply_data(&self, req: &ApplyRequest) -> PluginResult<ApplyResponse> {
        let target = Target::of(&req.planned)?;
        let (instance, schema) = self.data_schema(&target).await?;
        let config = Json::Object(req.planned.attributes.clone());
        let pending = req.dry_run && has_unresolved(&config);
        if pending {
            // Still validate the shape; only unresolved references may be left.
            schema
                .block
                .encode_config(&config, true)
                .map_err(|e| err(ErrorKind::InvalidInput, &target.id, e))?;
            let unknown_paths = schema
                .block
                .attributes
                .iter()
                .filter(|(name, a)| a.computed && !req.planned.attributes.contains_key(*name))
                .map(|(name, _)| name.clone())
                .collect();
            return Ok(ApplyResponse {
                resource: req.planned.clone(),
                private: None,
                sensitive_paths: schema.block.sensitive_paths(&config),
                unknown_paths,
                requires_replace: Vec::new(),
            });
        }
        let read = self
            .read_data_source(&instance, &target, &schema, &config)
            .await?;
        Ok(ApplyResponse {
            resource: resource_from(&req.planned, read.json),
            private: None,
            sensitive_paths: read.sensitive,
            unknown_paths: read.unknown,
            requires_replace: Vec::new(),
        })
    }

    /// A data source refreshed: read again from its configuration (the planned resource, else
    /// the recorded one without the attributes only the provider sets).
    pub(super) async fn read_data(&self, req: &ReadRequest) -> PluginResult<ReadResponse> {
        // Nothing recorded yet: the kernel plans a "create", whose apply is the first read.
        if req.prior.is_none() {
            return Ok(ReadResponse::default());
        }
        let Some(template) = req.planned.as_ref().or(req.prior.as_ref()) else {
            return Ok(ReadResponse::default());
        };
        let target = Target::of(template)?;
        let (instance, schema) = self.data_schema(&target).await?;
        let mut config = template.attributes.clone();
        if req.planned.is_none() {
            config.retain(|name, _| {
                schema
                    .block
                    .attributes
                    .get(name)
                    .is_none_or(|a| a.optional || a.required)
            });
        }
        let config = Json::Object(config);
        if has_unresolved(&config) {
            // References not resolved yet: nothing to read until the apply.
            return Ok(ReadResponse::default());
        }
        let read = self
            .read_data_source(&instance, &target, &schema, &config)
            .await?;
        Ok(ReadResponse {
            resource: Some(resource_from(template, read.json)),
            private: None,
            sensitive_paths: read.sensitive,
        })
    }
}
