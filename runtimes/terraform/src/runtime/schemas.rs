//! Provider schemas: per binary, from memory, then the on-disk cache keyed by the binary's
//! checksum, then GetProviderSchema; and the schema of one managed resource or data source type.

use super::*;

impl Inner {
    /// Schema for a binary: memory, then the disk cache by checksum, then GetSchema.
    pub(super) async fn schema(
        &self,
        settings: &Settings,
        binary: &Path,
        provider: &Provider,
    ) -> PluginResult<(String, Arc<ProviderSchema>)> {
        let schema_dir = settings.schema_dir.clone();
        let bin = binary.to_path_buf();
        let checksum =
            tokio::task::spawn_blocking(move || schema_cache::binary_checksum(&bin, &schema_dir))
                .await
                .map_err(|e| PluginError::internal(e.to_string()))?
                .map_err(|e| {
                    PluginError::new(
                        ErrorKind::Unavailable,
                        format!("hashing {}: {e}", binary.display()),
                    )
                })?;
        let mut schemas = self.schemas.lock().await;
        if let Some(s) = schemas.get(&checksum) {
            return Ok((checksum, s.clone()));
        }
        let dir = settings.schema_dir.clone();
        let sum = checksum.clone();
        let cached = tokio::task::spawn_blocking(move || schema_cache::load_cached(&dir, &sum))
            .await
            .ok()
            .flatten();
        let schema = match cached {
            Some(s) => s,
            None => {
                let (s, diags) = provider.get_schema().await.map_err(plain_rpc_error)?;
                check_provider_diags("reading the provider schema", &diags)?;
                if let Err(e) = schema_cache::store_cached(&settings.schema_dir, &checksum, &s) {
                    tracing::warn!("could not cache the provider schema: {e}");
                }
                s
            }
        };
        let schema = Arc::new(schema);
        schemas.insert(checksum.clone(), schema.clone());
        Ok((checksum, schema))
    }

    /// The schema of the managed resource type a target names.
    pub(super) async fn resource_schema(
        &self,
        target: &Target,
    ) -> PluginResult<(Arc<Instance>, Arc<Schema>)> {
        self.type_schema(target, false).await
    }

    /// The schema of the data source a target names.
    pub(super) async fn data_schema(
        &self,
        target: &Target,
    ) -> PluginResult<(Arc<Instance>, Arc<Schema>)> {
        self.type_schema(target, true).await
    }

    /// The schema of a target's type in its provider: a managed resource type, or with
    /// `data_source` a data source (the two share names, `aws_s3_bucket`).
    async fn type_schema(
        &self,
        target: &Target,
        data_source: bool,
    ) -> PluginResult<(Arc<Instance>, Arc<Schema>)> {
        let instance = self.instance(target).await?;
        let (found, of, kind) = if data_source {
            (
                instance.schema.data_source(&target.type_name),
                "data source ",
                "data source",
            )
        } else {
            (
                instance.schema.resource(&target.type_name),
                "",
                "resource type",
            )
        };
        let schema = found
            .map_err(|e| {
                err(
                    ErrorKind::Internal,
                    &target.id,
                    format!(
                        "provider {} schema of {of}{}: {e}",
                        instance.address, target.type_name
                    ),
                )
            })?
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidInput,
                    &target.id,
                    format!(
                        "provider {} has no {kind} {:?}",
                        instance.address, target.type_name
                    ),
                )
            })?;
        Ok((instance, schema))
    }
}
