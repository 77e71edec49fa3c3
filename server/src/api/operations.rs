//! Operations: queueing previews, applies, destroys and day-2 runs, reading them, deciding on
//! them (approve, reject, cancel) and streaming their events as Server-Sent Events.

use super::*;

/// What to run.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateOperation {
    kind: OperationKind,
    /// For an apply: after each resource is applied, wait for it to become ready (runtimes that
    /// can watch), its health streaming as `watch` events, as `kusionctl apply --watch` does.
    #[serde(default)]
    watch: bool,
}

/// Queue a preview, apply or destroy of the stack (operator). Apply and destroy of a stack with
/// `requireApproval: true` stop in `awaiting_approval` after planning.
#[utoipa::path(post, path = "/api/v1/projects/{project}/stacks/{stack}/operations",
    params(("project" = String, Path), ("stack" = String, Path)),
    request_body = CreateOperation,
    responses((status = 202, body = Operation), (status = 400, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
pub(super) async fn create_operation(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
    body: Result<Json<CreateOperation>, JsonRejection>,
) -> AppResult<Response> {
    require(&principal, &project, Role::Operator)?;
    let body = json_body(body)?;
    if body.kind == OperationKind::Run {
        return Err(Problem::bad_request(format!(
            "a day-2 run names its program: POST /api/v1/projects/{project}/stacks/{stack}/runs"
        )));
    }
    if body.watch && body.kind != OperationKind::Apply {
        return Err(Problem::bad_request(format!(
            "`watch` is for an apply, not a {}",
            body.kind.name()
        )));
    }
    let found = find_stack(&state, &project, &stack).await?;
    let mut op = ops::new_operation(body.kind, &found, &principal.subject);
    op.watch = body.watch;
    queued(&state, op)
}

/// Stores a new operation and answers 202 with its location.
pub(super) fn queued(state: &AppState, op: Operation) -> AppResult<Response> {
    state.queue.create(&op)?;
    let location = format!("/api/v1/operations/{}", op.id);
    let mut response = (StatusCode::ACCEPTED, Json(op)).into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}

/// A day-2 program to run on the stack's clusters.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateRun {
    /// The program: a `.k` file written with the `kusion.ops` package, its path relative to the
    /// checkout's root (`ops/AppRecovery.k`).
    program: String,
    /// The program's `option("KEY")` values, as `kusionctl run -D KEY=VALUE` gives them.
    #[serde(default)]
    args: std::collections::BTreeMap<String, String>,
    /// Run the targets that resolved even when some subjects could not be resolved.
    #[serde(default)]
    partial: bool,
}

/// Queue a day-2 run (operator): the program is compiled, checked against the policies and
/// preflighted, then run in batches with each target recorded in the stack's run history
/// (`run` on the operation names the record). On a stack with `requireApproval: true` it stops
/// in `awaiting_approval` with its plan, and starts once approved only if the plan is unchanged.
#[utoipa::path(post, path = "/api/v1/projects/{project}/stacks/{stack}/runs",
    params(("project" = String, Path), ("stack" = String, Path)),
    request_body = CreateRun,
    responses((status = 202, body = Operation), (status = 400, body = Problem), (status = 403, body = Problem), (status = 404, body = Problem)))]
pub(super) async fn create_run(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path((project, stack)): Path<(String, String)>,
    body: Result<Json<CreateRun>, JsonRejection>,
) -> AppResult<Response> {
    require(&principal, &project, Role::Operator)?;
    let body = json_body(body)?;
    let program = std::path::Path::new(&body.program);
    let inside = program
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if body.program.is_empty() || !inside || program.extension().is_none_or(|e| e != "k") {
        return Err(Problem::bad_request(format!(
            "program {:?}: a .k file named by its path inside the checkout (no `..`, not absolute)",
            body.program
        )));
    }
    if let Some(key) = body
        .args
        .keys()
        .find(|k| k.trim().is_empty() || k.contains('='))
    {
        return Err(Problem::bad_request(format!(
            "argument {key:?}: a name, without `=`"
        )));
    }
    let found = find_stack(&state, &project, &stack).await?;
    let mut op = ops::new_operation(OperationKind::Run, &found, &principal.subject);
    op.program = Some(body.program);
    op.args = body.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
    op.partial = body.partial;
    queued(&state, op)
}

/// Operations on the projects the caller may view, oldest first.
#[utoipa::path(get, path = "/api/v1/operations", responses((status = 200, body = Vec<Operation>)))]
pub(super) async fn list_operations(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
) -> AppResult<Json<Vec<Operation>>> {
    Ok(Json(
        state
            .queue
            .list()?
            .into_iter()
            .filter(|o| principal.can(&o.project, Role::Viewer))
            .collect(),
    ))
}

/// The operation, found and visible to the caller with `role`. An operation on a project the
/// caller may not view answers 404, as if it did not exist.
pub(super) fn visible_operation(
    state: &AppState,
    principal: &Principal,
    id: &str,
    role: Role,
) -> AppResult<Operation> {
    let not_found = || Problem::not_found(format!("no operation {id}"));
    let op = state.queue.get(id)?.ok_or_else(not_found)?;
    if !principal.can(&op.project, Role::Viewer) {
        return Err(not_found());
    }
    require(principal, &op.project, role)?;
    Ok(op)
}

#[utoipa::path(get, path = "/api/v1/operations/{id}", params(("id" = String, Path)),
    responses((status = 200, body = Operation), (status = 404, body = Problem)))]
pub(super) async fn get_operation(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> AppResult<Json<Operation>> {
    Ok(Json(visible_operation(
        &state,
        &principal,
        &id,
        Role::Viewer,
    )?))
}

/// Approve an operation awaiting approval (approver; not the person who asked for it).
#[utoipa::path(post, path = "/api/v1/operations/{id}/approve", params(("id" = String, Path)),
    responses((status = 200, body = Operation), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub(super) async fn approve_operation(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> AppResult<Json<Operation>> {
    decide(&state, &principal, &id, true).map(Json)
}

/// Reject an operation awaiting approval (approver); nothing changes.
#[utoipa::path(post, path = "/api/v1/operations/{id}/reject", params(("id" = String, Path)),
    responses((status = 200, body = Operation), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub(super) async fn reject_operation(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> AppResult<Json<Operation>> {
    decide(&state, &principal, &id, false).map(Json)
}

/// Cancel an operation (operator): one that waits (queued or awaiting approval) ends at once
/// with nothing changed; a running one starts no new step, lets the steps under way finish and
/// ends `cancelled` with what was done recorded. 409 once it has ended.
#[utoipa::path(post, path = "/api/v1/operations/{id}/cancel", params(("id" = String, Path)),
    responses((status = 200, body = Operation), (status = 403, body = Problem), (status = 404, body = Problem), (status = 409, body = Problem)))]
pub(super) async fn cancel_operation(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
) -> AppResult<Json<Operation>> {
    // A claim can move a queued operation to running between the read and the write: look again.
    for _ in 0..3 {
        let mut op = visible_operation(&state, &principal, &id, Role::Operator)?;
        let was = op.status;
        if was.is_final() {
            return Err(Problem::conflict(format!(
                "operation {id} has already ended ({})",
                was.name()
            )));
        }
        if op.cancelled_by.is_some() {
            return Ok(Json(op));
        }
        op.cancelled_by = Some(principal.subject.clone());
        if was == OperationStatus::Running {
            if state.queue.update(&op, was)? {
                state.queue.push_event(
                    &id,
                    EventKind::Status {
                        status: was,
                        message: Some(format!(
                            "{} asked to cancel: no new step starts; steps under way finish",
                            principal.subject
                        )),
                    },
                )?;
                return Ok(Json(state.queue.get(&id)?.unwrap_or(op)));
            }
            continue;
        }
        op.status = OperationStatus::Cancelled;
        // The event before the status, as for approvals: a stream ends on a final status once
        // it has every event.
        state.queue.push_event(
            &id,
            EventKind::Status {
                status: OperationStatus::Cancelled,
                message: Some(format!(
                    "cancelled by {}; nothing changed",
                    principal.subject
                )),
            },
        )?;
        if state.queue.update(&op, was)? {
            return Ok(Json(state.queue.get(&id)?.unwrap_or(op)));
        }
        let now = state.queue.get(&id)?.map_or(was, |o| o.status);
        state.queue.push_event(
            &id,
            EventKind::Status {
                status: now,
                message: Some("not cancelled yet: the operation changed meanwhile".into()),
            },
        )?;
    }
    Err(Problem::conflict(format!(
        "operation {id} kept changing; try again"
    )))
}

pub(super) fn decide(
    state: &AppState,
    principal: &Principal,
    id: &str,
    approve: bool,
) -> AppResult<Operation> {
    let mut op = visible_operation(state, principal, id, Role::Approver)?;
    if op.status != OperationStatus::AwaitingApproval {
        return Err(Problem::conflict(format!(
            "operation {id} is {}, not awaiting approval",
            op.status.name()
        )));
    }
    if approve && op.requested_by == principal.subject {
        // Four eyes: the approval must come from someone other than the requester.
        return Err(Problem::forbidden(format!(
            "{:?} asked for this operation; a different person must approve it",
            principal.subject
        )));
    }
    let (status, message) = if approve {
        op.approved_by = Some(principal.subject.clone());
        (
            OperationStatus::Queued,
            format!("approved by {}", principal.subject),
        )
    } else {
        op.rejected_by = Some(principal.subject.clone());
        (
            OperationStatus::Rejected,
            format!("rejected by {}", principal.subject),
        )
    };
    op.status = status;
    // The event before the status: a stream ends on a final status once it has every event.
    state.queue.push_event(
        id,
        EventKind::Status {
            status,
            message: Some(message),
        },
    )?;
    if !state.queue.update(&op, OperationStatus::AwaitingApproval)? {
        return Err(Problem::conflict(format!(
            "operation {id} changed meanwhile (approved or rejected by someone else)"
        )));
    }
    Ok(state.queue.get(id)?.unwrap_or(op))
}

/// The operation's progress as Server-Sent Events (`status`, `planned`, `step_started`,
/// `step_finished`, `watch`), from the first or after `Last-Event-ID`; the stream ends when the
/// operation reaches a final status.
#[utoipa::path(get, path = "/api/v1/operations/{id}/events", params(("id" = String, Path)),
    responses((status = 200, content_type = "text/event-stream", body = OperationEvent), (status = 404, body = Problem)))]
pub(super) async fn operation_events(
    State(state): Shared,
    Extension(principal): Extension<Principal>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> AppResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    visible_operation(&state, &principal, &id, Role::Viewer)?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    struct Cursor {
        state: Arc<AppState>,
        id: String,
        after: u64,
        buffer: VecDeque<OperationEvent>,
        changes: tokio::sync::watch::Receiver<u64>,
        shutdown: tokio::sync::watch::Receiver<bool>,
        done: bool,
    }
    let cursor = Cursor {
        changes: state.queue.changes(),
        shutdown: state.shutdown.subscribe(),
        state,
        id,
        after,
        buffer: VecDeque::new(),
        done: false,
    };
    let stream = futures::stream::unfold(cursor, |mut c| async move {
        loop {
            if let Some(event) = c.buffer.pop_front() {
                c.after = event.seq;
                let sse = SseEvent::default()
                    .event(event.kind.name())
                    .id(event.seq.to_string())
                    .json_data(&event)
                    .unwrap_or_else(|_| SseEvent::default().comment("unserializable event"));
                return Some((Ok(sse), c));
            }
            if c.done {
                return None;
            }
            // Read the status before the events: a final status seen here means every event
            // was pushed already.
            let finished = c
                .state
                .queue
                .get(&c.id)
                .ok()
                .flatten()
                .is_none_or(|o| o.status.is_final());
            // A shutting-down server ends its streams (clients resume with Last-Event-ID
            // elsewhere) rather than hold the shutdown, after one last read: its workers have
            // recorded where their operations are by the time it is raised.
            let stopping = *c.shutdown.borrow();
            let events = c.state.queue.events(&c.id, c.after).unwrap_or_default();
            if events.is_empty() {
                if finished || stopping {
                    return None;
                }
                tokio::select! {
                    _ = tokio::time::timeout(Duration::from_secs(5), c.changes.changed()) => {}
                    () = crate::stopped(&mut c.shutdown) => {}
                }
                continue;
            }
            c.done = finished || stopping;
            c.buffer.extend(events);
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}
