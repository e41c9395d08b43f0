//! MCP tasks (the `io.modelcontextprotocol/tasks` extension), served from the ledger.
//!
//! A `tools/call` of a tool configured `task = "optional"` or `"required"`, from a client that
//! declared the extension, is answered at once with a task handle; the call runs on this host
//! under every limit it has in a request. Whatever host of the ledger a client asks then:
//! - `tasks/get` reads the task and its call's state from the ledger (`crates/ledger/src/tasks.rs`);
//! - `tasks/cancel` marks the task in the ledger; the host that runs it reads the marks of its
//!   own tasks every [`CANCEL_POLL`] and stops those calls (at once when it is this host);
//! - `tasks/update` answers a task waiting for approval: the approved call runs on this host,
//!   and the task follows it there.
//!
//! A task is visible only to the principal and tenant that created it: any other caller gets
//! the `-32602` an unknown id gets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientCapabilities, CreateTaskResult, ErrorData, GetTaskResult, Task, TaskStatus,
};
use rmcp::service::{RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::http::door::{Admitted, Pass};
use super::mapping::wraps_output;
pub use super::task_view::POLL_INTERVAL_MS;
use super::task_view::{detailed, rfc3339};
use super::Shared;
use toolhost_contract::{Caller, Code, RunContext, Stage, TaskMode, ToolCall, ToolResult, Usage};
use toolhost_registry::Tool as HostTool;
use toolhost_runtime::tasks::{NewTask, TaskCaps, TaskCreated, TaskRecord};
use toolhost_runtime::Prepared;
use toolhost_runtime::Runtime;

/// How often a host reads the cancel marks of the tasks it runs: the longest a cancel asked on
/// another host waits before this host stops the call (plus the guest's next epoch tick).
pub const CANCEL_POLL: Duration = Duration::from_millis(250);

/// How often a host deletes expired tasks.
pub const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// How long a task is kept after it is created, unless `[serve] task_ttl_secs` says otherwise.
pub const DEFAULT_TASK_TTL_SECS: u64 = 3_600;

/// Whether a call of `tool` runs as a task: the tool's `task` setting, whether the request
/// declared the extension, and its era. A `required` tool is refused (`-32021`) to a client
/// that did not declare it. The extension is 2026-07-28's: a handshake-era session (`stateless`
/// false) never gets a task result, whatever it declared — an `optional` tool runs in the
/// request, a `required` one is refused (`-32600`, naming the revision it needs).
pub fn as_task(
    resolved: Option<&HostTool>,
    tool: &str,
    cx: &RequestContext<RoleServer>,
    stateless: bool,
) -> Result<bool, ErrorData> {
    // A tool hidden from the caller is no task: the call answers as for no tool.
    let mode = resolved.map(|t| t.task);
    let declared = cx.client_capabilities().is_some_and(|c| c.supports_tasks());
    match (mode, declared, stateless) {
        (Some(TaskMode::Required), _, false) => Err(ErrorData::invalid_request(
            format!(
                "the tool {tool:?} runs only as a task, which needs MCP 2026-07-28 with the \
                 io.modelcontextprotocol/tasks extension; this session speaks an earlier revision"
            ),
            None,
        )),
        (Some(TaskMode::Required), false, true) => {
            Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ))
        }
        (Some(TaskMode::Optional | TaskMode::Required), true, true) => Ok(true),
        _ => Ok(false),
    }
}

/// The tasks this host runs, by id, with the run's number and the token that stops it.
pub struct Tasks {
    running: Mutex<HashMap<String, (u64, CancellationToken)>>,
    /// Numbers the runs, so that a run that ends removes its own entry only.
    runs: std::sync::atomic::AtomicU64,
    ttl_ms: i64,
    /// What one caller may hold in open tasks.
    caps: TaskCaps,
}

impl Tasks {
    /// Tasks kept `ttl_secs` after creation, each caller's open ones bounded by `caps`.
    pub fn new(ttl_secs: u64, caps: TaskCaps) -> Arc<Tasks> {
        let ttl_ms = i64::try_from(ttl_secs.saturating_mul(1000)).unwrap_or(i64::MAX);
        Arc::new(Tasks {
            running: Mutex::new(HashMap::new()),
            runs: std::sync::atomic::AtomicU64::new(0),
            ttl_ms: ttl_ms.clamp(1, toolhost_runtime::tasks::MAX_TASK_TTL_MS),
            caps,
        })
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, CancellationToken)>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read the cancel marks of this host's tasks every [`CANCEL_POLL`] and stop those calls;
    /// prune expired tasks every [`PRUNE_EVERY`]. Runs until the runtime stops.
    pub async fn watch(self: Arc<Tasks>, runtime: Arc<Runtime>) {
        let mut tick = tokio::time::interval(CANCEL_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_prune = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            if !self.running().is_empty() {
                let rt = runtime.clone();
                let marked = tokio::task::spawn_blocking(move || rt.tasks().cancelled())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .unwrap_or_default();
                let running = self.running();
                for id in marked {
                    if let Some((_, token)) = running.get(&id) {
                        token.cancel();
                    }
                }
            }
            if last_prune.elapsed() >= PRUNE_EVERY {
                last_prune = tokio::time::Instant::now();
                let rt = runtime.clone();
                let _ = tokio::task::spawn_blocking(move || rt.tasks().prune()).await;
            }
        }
    }

    /// Create a task for `call` in `ctx`'s run, recorded in the ledger before this returns,
    /// and run the call on this host (tracked by `tracker`).
    ///
    /// A call the client named (a request id in a session; `toolhost/callId` in a `stateless`
    /// request) has the task id of its name: a resend of it is the same task, answered without
    /// running again; the same name with another tool or other arguments, or a name a call
    /// answered in a request already holds, is [`Created::Answer`] (the request's own answer
    /// follows: a replay or `duplicate_call_id`). An unnamed call gets a call id of its own
    /// task, so that no two tasks share a call.
    ///
    /// A call the pipeline would refuse at resolve, validate or authorize is no task: the
    /// request answers it at once, and no row keeps its arguments. Over HTTP the task counts
    /// as one of its caller's requests in flight until its call ends; and every caller's open
    /// tasks are bounded by the caps (`crates/ledger/src/tasks.rs`). A caller with no room left is refused
    /// `rate_limited` (recorded, as the pipeline's own rate refusals are).
    pub async fn create(
        self: &Arc<Tasks>,
        shared: &Shared,
        (ctx, mut call, prepared): (RunContext, ToolCall, Prepared),
        (token, stateless, admitted): (Option<String>, bool, Option<Admitted>),
    ) -> Result<Created, ErrorData> {
        let (runtime, tracker) = (&shared.runtime, &shared.tracker);
        let Some(passes) = runtime.would_pass_checks(&ctx, &call, &prepared) else {
            return Ok(Created::Answer);
        };
        let named = !stateless || call.call_id.starts_with("key:");
        let task_id = if named {
            named_task(&ctx, &call.call_id)
        } else {
            let fresh = uuid::Uuid::new_v4().simple().to_string();
            call.call_id = format!("task:{fresh}");
            format!("task-{fresh}")
        };
        let task = NewTask {
            task_id,
            caller: ctx.caller.clone(),
            run_id: ctx.run_id.clone(),
            call_id: call.call_id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.to_string(),
            call_digest: prepared.fingerprint().to_string(),
            for_approval: passes.needs_approval,
            ttl_ms: self.ttl_ms,
        };
        // A named call the ledger knows (a task's, or one answered in a request) is not run
        // again: its own task answers, or the request does (a replay, `duplicate_call_id`).
        let rt = runtime.clone();
        let (run, id) = (task.run_id.clone(), task.call_id.clone());
        let known = named && blocking(move || rt.tasks().call_known(&run, &id)).await?;
        let pass = match admitted.as_ref().filter(|_| !known).map(Admitted::hold) {
            None => None,
            Some(Ok(pass)) => Some(pass),
            Some(Err(_)) => {
                let message = "too many of this caller's requests and tasks are in flight; \
                               try again when one ends";
                return Ok(self
                    .refuse(runtime, (&ctx, &call, &prepared), message)
                    .await);
            }
        };
        let created = if known {
            TaskCreated::Exists
        } else {
            let (rt, created, caps) = (runtime.clone(), task.clone(), self.caps);
            blocking(move || rt.tasks().create(&created, &caps)).await?
        };
        match created {
            TaskCreated::Created => {}
            TaskCreated::Full => {
                let message = "this caller holds too many open tasks; try again when one ends";
                return Ok(self
                    .refuse(runtime, (&ctx, &call, &prepared), message)
                    .await);
            }
            TaskCreated::Exists => {
                let caller = &ctx.caller;
                let known = self.find(runtime, caller, &task.task_id).await.ok();
                return Ok(known
                    .filter(|t| t.call_digest == task.call_digest)
                    .map_or(Created::Answer, |t| {
                        Created::Task(seed(&t.task_id, t.created_at_ms, self.ttl_ms))
                    }));
            }
        }
        self.run(
            runtime,
            tracker,
            &task.task_id,
            (ctx, call, prepared, token),
            pass,
        );
        Ok(Created::Task(seed(
            &task.task_id,
            toolhost_runtime::tasks::now_ms(),
            self.ttl_ms,
        )))
    }

    /// The recorded `rate_limited` refusal of a task call its caller has no room for.
    async fn refuse(
        &self,
        runtime: &Runtime,
        (ctx, call, prepared): (&RunContext, &ToolCall, &Prepared),
        message: &str,
    ) -> Created {
        let r = ToolResult::failed(call, Code::RateLimited, message, Usage::default());
        let r = runtime
            .refuse_prepared(ctx, call, prepared, Stage::Limit, r)
            .await;
        Created::Refused(Box::new(r))
    }

    /// Run `call` for task `task_id` on this host: its token is registered for cancels until
    /// the call ends.
    pub(super) fn run(
        self: &Arc<Tasks>,
        runtime: &Arc<Runtime>,
        tracker: &TaskTracker,
        task_id: &str,
        (mut ctx, call, prepared, token): (RunContext, ToolCall, Prepared, Option<String>),
        pass: Option<Pass>,
    ) {
        let stop = CancellationToken::new();
        ctx.cancel = stop.clone();
        let run = self.runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.running().insert(task_id.to_owned(), (run, stop));
        let (tasks, runtime, id) = (self.clone(), runtime.clone(), task_id.to_owned());
        tracker.spawn(async move {
            let result = runtime
                .run_prepared(&ctx, &call, &prepared, token.as_deref())
                .await;
            // The call is over once recorded: its place in flight is free before the
            // bookkeeping below.
            drop(pass);
            {
                let mut running = tasks.running();
                // Only this run's entry: the approved call of the same task may have replaced
                // it.
                if running.get(&id).is_some_and(|(g, _)| *g == run) {
                    running.remove(&id);
                }
            }
            // A call that waits for approval keeps its task open (and its arguments, for the
            // approved call); any other end closes it.
            if result.code != Some(Code::ApprovalRequired) {
                let rt = runtime.clone();
                let _ = blocking(move || rt.tasks().close(&id)).await;
            }
        });
    }

    /// `tasks/get`: the task as `caller` may see it, from the ledger. A task only the
    /// operator approves points a client that takes URL elicitation (`url_elicitation`) at its
    /// console page, when the console's address is configured.
    pub async fn get(
        &self,
        shared: &Shared,
        caller: &Caller,
        task_id: &str,
        url_elicitation: bool,
    ) -> Result<GetTaskResult, ErrorData> {
        let (runtime, seal) = (&shared.runtime, &shared.seal);
        let task = self.find(runtime, caller, task_id).await?;
        let seen = runtime.visibility(caller);
        let tool = seen.tool(&task.tool);
        let wrap = wraps_output(tool);
        let risk = tool.map(|t| t.risk);
        let client_approves = !runtime.approvals().operator_only_by_name(&task.tool);
        let console = shared.console_url.as_deref().filter(|_| url_elicitation);
        Ok(GetTaskResult::new(detailed(
            &task,
            seal,
            caller,
            (wrap, client_approves, risk),
            console,
        )))
    }

    /// `tasks/cancel`: mark the task cancelled for whichever host runs it, and stop it now if
    /// it runs here. A task that ended is left as it ended (the same empty answer).
    pub async fn cancel(
        &self,
        shared: &Shared,
        caller: &Caller,
        task_id: &str,
    ) -> Result<(), ErrorData> {
        let rt = shared.runtime.clone();
        let (id, who) = (task_id.to_owned(), caller.clone());
        let known = blocking(move || rt.tasks().cancel(&id, &who)).await?;
        if !known {
            return Err(unknown_task(task_id));
        }
        if let Some((_, token)) = self.running().get(task_id) {
            token.cancel();
        }
        Ok(())
    }

    /// The task `task_id` as `caller` may see it, or the error an unknown id gets.
    pub(super) async fn find(
        &self,
        runtime: &Arc<Runtime>,
        caller: &Caller,
        task_id: &str,
    ) -> Result<TaskRecord, ErrorData> {
        let rt = runtime.clone();
        let (id, who) = (task_id.to_owned(), caller.clone());
        blocking(move || rt.tasks().find(&id, &who))
            .await?
            .ok_or_else(|| unknown_task(task_id))
    }
}

/// What `tools/call` does with a call of a task tool.
pub enum Created {
    /// Answer with this task.
    Task(CreateTaskResult),
    /// Answer as a request: the call is refused at once, or is a replay, or reuses an id.
    Answer,
    /// The caller has nothing left in flight: this recorded refusal is the answer.
    Refused(Box<ToolResult>),
}

/// The answer that creates a task: its id, `working`, its ttl and the poll interval.
fn seed(task_id: &str, created_at_ms: i64, ttl_ms: i64) -> CreateTaskResult {
    let at = rfc3339(created_at_ms);
    let task = Task::new(task_id, TaskStatus::Working, at.clone(), at)
        .with_ttl_ms(u64::try_from(ttl_ms).unwrap_or(u64::MAX))
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    CreateTaskResult::new(task)
}

/// The task id of the call `call_id` a client named in `ctx`'s run: the same for a resend,
/// another for any other caller, run or call.
fn named_task(ctx: &RunContext, call_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [
        "toolhost task",
        &ctx.caller.principal,
        &ctx.caller.tenant,
        &ctx.run_id,
        call_id,
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    format!("task-{}", &hex::encode(h.finalize())[..32])
}

/// Run a ledger operation off the async workers (a PostgreSQL round trip, a SQLite lock).
pub(super) async fn blocking<T: Send + 'static>(
    op: impl FnOnce() -> Result<T, toolhost_runtime::tasks::LedgerError> + Send + 'static,
) -> Result<T, ErrorData> {
    match tokio::task::spawn_blocking(op).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "a task's ledger operation failed");
            Err(ErrorData::internal_error(
                "the ledger is not available",
                None,
            ))
        }
        Err(_) => Err(ErrorData::internal_error(
            "the ledger is not available",
            None,
        )),
    }
}

/// The `-32602` of a task id this caller does not have.
fn unknown_task(task_id: &str) -> ErrorData {
    let shown = toolhost_contract::bounds::clip(task_id, 128);
    ErrorData::invalid_params(format!("no task {shown:?}"), None)
}
