//! The provider process pool: one started, schema-loaded and configured provider per (provider
//! address, provider configuration) and operation, started on first use, replaced when dead, and
//! shut down together.

use super::*;

/// A started, configured provider with its schema.
pub(super) struct Instance {
    pub(super) address: ProviderAddress,
    pub(super) provider: Arc<Provider>,
    pub(super) schema: Arc<ProviderSchema>,
    /// SHA-256 of the provider binary (key of the schema and validation caches).
    pub(super) checksum: String,
}

pub(super) type ProviderKey = (String, String);
/// A provider started once per operation, or the reason it could not start.
pub(super) type InstanceCell = Arc<OnceCell<Result<Arc<Instance>, PluginError>>>;

impl Inner {
    /// The running instance for a target, starting it on first use; a dead one is replaced.
    pub(super) async fn instance(&self, target: &Target) -> PluginResult<Arc<Instance>> {
        loop {
            let cell = self
                .instances
                .lock()
                .await
                .entry(target.key())
                .or_default()
                .clone();
            let instance = match cell.get_or_init(|| self.start(target)).await {
                Ok(instance) => instance.clone(),
                Err(e) => return Err(err(e.kind, &target.id, &e.message)),
            };
            if !instance.provider.is_dead() {
                return Ok(instance);
            }
            // The process died (crash, kill): forget it and start a fresh one.
            let mut map = self.instances.lock().await;
            if map
                .get(&target.key())
                .is_some_and(|c| Arc::ptr_eq(c, &cell))
            {
                map.remove(&target.key());
            }
            drop(map);
            instance.provider.shutdown(Duration::from_millis(100)).await;
        }
    }

    /// Start, load the schema of and configure the provider for `target`. Errors name the
    /// provider, not the resource: they are shared by every resource the provider serves.
    pub(super) async fn start(&self, target: &Target) -> PluginResult<Arc<Instance>> {
        let settings = self.settings();
        let address = target.address.clone();
        let started = Instant::now();
        let install_cfg = settings.install.clone();
        let addr = address.clone();
        let binary = tokio::task::spawn_blocking(move || install::install(&addr, &install_cfg))
            .await
            .map_err(|e| PluginError::internal(e.to_string()))?
            .map_err(|e| {
                let kind = if matches!(
                    e,
                    install::InstallError::NotFound { .. } | install::InstallError::BadAddress(_)
                ) {
                    ErrorKind::InvalidInput
                } else {
                    ErrorKind::Unavailable
                };
                PluginError::new(kind, e.to_string())
            })?;
        let log = (!settings.verbose).then(|| {
            settings.log_dir.join(format!(
                "terraform-provider-{}_{}.log",
                address.name, address.version
            ))
        });
        let provider = Provider::start(&binary, log.as_deref())
            .await
            .map_err(plain_rpc_error)?;
        tracing::debug!(provider = %address, pid = provider.pid, protocol = provider.protocol, elapsed = ?started.elapsed(), "provider started");
        let t = Instant::now();
        let (checksum, schema) = match self.schema(&settings, &binary, &provider).await {
            Ok(s) => s,
            Err(e) => {
                provider.shutdown(settings.grace).await;
                return Err(PluginError::new(
                    e.kind,
                    format!("provider {address}: {}", e.message),
                ));
            }
        };
        tracing::debug!(provider = %address, elapsed = ?t.elapsed(), "schema loaded");
        let instance = Arc::new(Instance {
            address,
            provider,
            schema,
            checksum,
        });
        if let Err(e) = self.configure_instance(&settings, &instance, target).await {
            instance.provider.shutdown(settings.grace).await;
            return Err(e);
        }
        tracing::debug!(provider = %instance.address, elapsed = ?started.elapsed(), "provider ready");
        Ok(instance)
    }

    pub(super) async fn configure_instance(
        &self,
        settings: &Settings,
        instance: &Instance,
        target: &Target,
    ) -> PluginResult<()> {
        let address = &instance.address;
        let config = instance
            .schema
            .provider
            .block
            .encode_config(&target.meta, false)
            .map_err(|e| {
                PluginError::invalid(format!("extensions.providerMeta for {address}: {e}"))
            })?;
        let config = cty::to_bytes(&config);
        let prepared = match schema_cache::load_validated(
            &settings.schema_dir,
            &instance.checksum,
            &config,
        ) {
            Some(prepared) => prepared,
            None => {
                let t = Instant::now();
                let (prepared, diags) = instance
                    .provider
                    .validate_provider_config(config.clone())
                    .await
                    .map_err(plain_rpc_error)?;
                tracing::debug!(provider = %address, elapsed = ?t.elapsed(), "provider configuration validated");
                check_provider_diags(&format!("provider {address} configuration"), &diags)?;
                let prepared = prepared.unwrap_or_default();
                if let Err(e) = schema_cache::store_validated(
                    &settings.schema_dir,
                    &instance.checksum,
                    &config,
                    &prepared,
                ) {
                    tracing::warn!("could not cache the provider configuration verdict: {e}");
                }
                prepared
            }
        };
        let t = Instant::now();
        let config = if prepared.is_empty() {
            config
        } else {
            prepared
        };
        let diags = instance
            .provider
            .configure(config)
            .await
            .map_err(plain_rpc_error)?;
        tracing::debug!(provider = %address, elapsed = ?t.elapsed(), "provider configured");
        check_provider_diags(&format!("configuring provider {address}"), &diags)
    }

    pub(super) async fn shutdown_all(&self) {
        let instances: Vec<_> = self
            .instances
            .lock()
            .await
            .drain()
            .map(|(_, v)| v)
            .collect();
        let grace = self.settings().grace;
        let mut tasks = Vec::new();
        for cell in instances {
            if let Some(Ok(instance)) = cell.get().cloned() {
                tasks.push(tokio::spawn(async move {
                    instance.provider.shutdown(grace).await
                }));
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    }
}
