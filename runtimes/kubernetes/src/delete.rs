//! Deleting an object: its propagation policy (the stack's, or the resource's own extension), and
//! waiting until it is really gone when the settings ask to.

use super::*;

pub(crate) fn propagation_of(
    resource: &Resource,
    settings: &Settings,
) -> PluginResult<Propagation> {
    match resource.extensions.get(EXT_PROPAGATION) {
        None => Ok(settings.delete_propagation),
        Some(v) => v.as_str().and_then(Propagation::parse).ok_or_else(|| {
            PluginError::invalid(format!(
                "{}: extension {EXT_PROPAGATION} must be Background, Foreground or Orphan",
                resource.id
            ))
        }),
    }
}

/// Deletes the object (absent is success) and, with `wait`, waits until it is gone
/// (finalizers done) for at most `limit`.
pub(crate) async fn delete_object(
    api: &kube::Api<kube::api::DynamicObject>,
    target: &Target,
    propagation: Propagation,
    wait: bool,
    limit: Duration,
) -> PluginResult<()> {
    let params = DeleteParams {
        propagation_policy: Some(propagation.policy()),
        ..DeleteParams::default()
    };
    match api.delete(&target.name, &params).await {
        Ok(_) => {}
        Err(e) if error::is_not_found(&e) => return Ok(()),
        Err(e) => return Err(error::from_kube(&target.id, "delete", e)),
    }
    if !wait {
        return Ok(());
    }
    let mut last_seen = String::new();
    let waited = tokio::time::timeout(limit, async {
        loop {
            match api.get_opt(&target.name).await {
                Ok(None) => return Ok(()),
                Ok(Some(obj)) => last_seen = obj.metadata.finalizers.unwrap_or_default().join(", "),
                Err(e) if error::is_not_found(&e) => return Ok(()),
                Err(e) => return Err(error::from_kube(&target.id, "waiting for deletion", e)),
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    })
    .await;
    match waited {
        Ok(r) => r,
        Err(_) => Err(PluginError::new(
            ErrorKind::Timeout,
            format!(
                "{}: deleted but still present (finalizers: [{last_seen}])",
                target.id
            ),
        )),
    }
}

pub(crate) async fn delete(inner: Arc<Inner>, req: DeleteRequest) -> PluginResult<()> {
    let resource = &req.resource;
    let target = target_of(resource)?;
    let settings = inner.settings();
    let propagation = propagation_of(resource, &settings)?;
    let cluster = inner.cluster(resource).await?;
    cluster.recent.forget(&target.id);
    let Some(kind) = cluster.checked_kind(&target).await? else {
        return Ok(()); // the kind is gone, so is the object
    };
    let api = cluster.api(&kind, &target);
    delete_object(
        &api,
        &target,
        propagation,
        settings.wait_for_delete,
        req.timeout.unwrap_or(DEFAULT_TIMEOUT),
    )
    .await
}
