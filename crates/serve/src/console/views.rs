//! The console's pages: the calls that wait for approval, one call (with approve and deny),
//! a run's calls as a timeline, and a call's receipt; and the decision a form posts.

use std::collections::HashMap;
use std::fmt::Write as _;

use hyper::StatusCode;

use super::html::{self, query, rows, shown, text, Signed};
use super::sessions::Operator;
use super::{refused, respond, see_other, Body, Console, HTML};
use crate::task_update::{waiting_approval, Answered, Answerer};
use crate::task_view::{canonical_arguments, rfc3339};
use crate::tasks::blocking;
use hyper::Response;
use toolhost_contract::{Caller, Pending};
use toolhost_runtime::evidence::CallRecord;
use toolhost_runtime::parse_handle;
use toolhost_runtime::tasks::{TaskCall, TaskRecord};

/// Waiting calls listed on the first page, oldest first.
pub const MAX_LISTED: u32 = 200;

/// Calls of a run shown on its timeline: the most recent ones.
pub const MAX_TIMELINE_CALLS: usize = 200;

type Fields = HashMap<String, String>;

impl Console {
    /// A GET of `path` by `operator`.
    pub(super) async fn view(&self, op: &Operator, path: &str, q: &Fields) -> Response<Body> {
        let signed = Signed {
            operator: &op.name,
            csrf: &op.csrf,
        };
        let field = |k: &str| q.get(k).map(String::as_str).unwrap_or("");
        let shown = match path {
            "/console" | "/console/" => self.waiting().await,
            "/console/task" => self.task(&signed, field("id")).await,
            "/console/run" => self.run(field("id")).await,
            "/console/receipt" => self.receipt(field("run"), field("call")).await,
            _ => Err((StatusCode::NOT_FOUND, "no such page".to_string())),
        };
        match shown {
            Ok((title, body)) => respond(
                StatusCode::OK,
                HTML,
                html::page(&title, Some(&signed), &body),
            ),
            Err((status, why)) => {
                let body = format!("<h1>{}</h1><p>{}</p>", status.as_u16(), text(&why));
                respond(status, HTML, html::page("Not shown", Some(&signed), &body))
            }
        }
    }

    /// The calls waiting for approval.
    async fn waiting(&self) -> Shown {
        let rt = self.shared.runtime.clone();
        let tasks = blocking(move || rt.tasks().waiting(MAX_LISTED))
            .await
            .map_err(unreadable)?;
        let mut body = format!(
            "<h1>Waiting for approval</h1><p class=\"note\">{} call(s), oldest first, on every \
             host of this ledger.</p>",
            tasks.len()
        );
        if tasks.is_empty() {
            body.push_str("<p id=\"none\">Nothing waits for approval.</p>");
            return Ok(("Waiting".into(), body));
        }
        body.push_str(
            "<table id=\"waiting\"><thead><tr><th>tool</th><th>risk</th><th>caller</th>\
             <th>run</th><th>waiting since</th><th></th></tr></thead><tbody>",
        );
        for t in &tasks {
            let risk = self.risk(&t.tool);
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{} (tenant {})</td>\
                 <td><a href=\"/console/run?id={}\">{}</a></td><td>{}</td>\
                 <td><a class=\"review\" href=\"/console/task?id={}\">Review</a></td></tr>",
                shown(&t.tool),
                text(&risk),
                shown(&t.principal),
                shown(&t.tenant),
                query(&t.run_id),
                shown(&t.run_id),
                rfc3339(t.updated_at_ms),
                query(&t.task_id),
            );
        }
        body.push_str("</tbody></table>");
        Ok(("Waiting".into(), body))
    }

    /// One task: the call it waits to run, shown as every front end shows it, with approve and
    /// deny; or, once answered, what its call became.
    async fn task(&self, signed: &Signed<'_>, id: &str) -> Shown {
        let task = self.find(id).await?;
        let mut body = String::new();
        let registry = self.shared.runtime.registry();
        let served = registry.get(&task.tool);
        let description = served
            .as_ref()
            .map(|t| {
                toolhost_contract::frame::unescape(&t.description).unwrap_or(t.description.clone())
            })
            .unwrap_or_default();
        match (waiting_approval(&task), canonical_arguments(&task)) {
            (Some(approval), Some(arguments)) => {
                let (digest, expires_at) = parse_handle(&approval.handle).unwrap_or_default();
                let caller = Caller::new(task.principal.clone(), task.tenant.clone());
                let pending = Pending {
                    tool: &task.tool,
                    risk: served.as_ref().map(|t| t.risk),
                    canonical_arguments: &arguments,
                    caller: Some(&caller),
                    run_id: &task.run_id,
                    call_id: &task.call_id,
                    digest: &digest,
                    expires_at,
                };
                let _ = write!(
                    body,
                    "<h1>Approve this tool call?</h1>\
                     <p class=\"description\"><b>{}</b>: {}</p>{}",
                    shown(&task.tool),
                    shown(&description),
                    rows(pending.rows())
                );
                let decide = |decision: &str, class: &str, label: &str| {
                    format!(
                        "<form method=\"post\" action=\"/console/task\">{}\
                         <input type=\"hidden\" name=\"id\" value=\"{}\">\
                         <input type=\"hidden\" name=\"digest\" value=\"{}\">\
                         <input type=\"hidden\" name=\"decision\" value=\"{decision}\">\
                         <button type=\"submit\" class=\"{class}\">{label}</button></form>",
                        html::csrf_field(signed.csrf),
                        text(&task.task_id),
                        text(&digest)
                    )
                };
                let _ = write!(
                    body,
                    "<div class=\"decide\">{}{}</div>",
                    decide("approve", "approve", "Approve this exact call once"),
                    decide("deny", "deny", "Deny")
                );
            }
            _ => {
                let _ = write!(
                    body,
                    "<h1>Not waiting</h1><p class=\"note\">This call no longer waits for \
                     approval.</p><p class=\"description\"><b>{}</b>: {}</p>",
                    shown(&task.tool),
                    shown(&description)
                );
                body.push_str(&call_state(&task));
            }
        }
        let _ = write!(
            body,
            "<p><a id=\"timeline\" href=\"/console/run?id={}\">The run's timeline</a></p>",
            query(&task.run_id)
        );
        Ok((format!("Call {}", task.tool), body))
    }

    /// The calls of run `id` in admission order, each with its events.
    async fn run(&self, id: &str) -> Shown {
        let rt = self.shared.runtime.clone();
        let run_id = id.to_owned();
        let calls = blocking(move || rt.evidence().run(&run_id))
            .await
            .map_err(unreadable)?;
        if calls.is_empty() {
            return Err((
                StatusCode::NOT_FOUND,
                "no call of this run is recorded".into(),
            ));
        }
        let (shown_calls, skipped) = newest(&calls, MAX_TIMELINE_CALLS);
        let mut body = format!("<h1>Run {}</h1>", shown(id));
        if skipped > 0 {
            let _ = write!(
                body,
                "<p class=\"note\">The {skipped} oldest calls are not shown.</p>"
            );
        }
        body.push_str("<ol id=\"calls\">");
        for c in shown_calls {
            body.push_str(&timeline_entry(c));
        }
        body.push_str("</ol>");
        Ok(("Run".into(), body))
    }

    /// The signed receipt of call `call` of run `run`.
    async fn receipt(&self, run: &str, call: &str) -> Shown {
        let Some(key) = &self.receipt_key else {
            return Err((StatusCode::NOT_FOUND, "this host signs no receipts".into()));
        };
        let rt = self.shared.runtime.clone();
        let (r, c, key) = (run.to_owned(), call.to_owned(), key.clone());
        let envelope = blocking(move || Ok(rt.evidence().receipt(&r, &c, &key)))
            .await
            .map_err(unreadable)?
            .map_err(|e| (StatusCode::CONFLICT, e.to_string()))?;
        let statement = envelope
            .statement()
            .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let pretty = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let sealed = serde_json::to_value(&envelope).unwrap_or_default();
        let body = format!(
            "<h1>Receipt of call {}</h1><p class=\"note\">Signed with this host's receipt key \
             (<code>toolhost receipt key</code> prints it); check it offline with \
             <code>toolhost receipt verify</code>.</p><h2>What it says</h2>\
             <pre id=\"statement\">{}</pre><h2>The signed envelope</h2><pre id=\"envelope\">{}</pre>",
            shown(call),
            shown(&pretty(&statement)),
            text(&pretty(&sealed)),
        );
        Ok(("Receipt".into(), body))
    }

    /// The decision an operator posted for a task.
    pub(super) async fn decide(&self, op: &Operator, form: &Fields) -> Response<Body> {
        let id = form.get("id").map(String::as_str).unwrap_or("");
        let approve = match form.get("decision").map(String::as_str) {
            Some("approve") => true,
            Some("deny") => false,
            _ => return refused(StatusCode::BAD_REQUEST, "decide approve or deny"),
        };
        let task = match self.find(id).await {
            Ok(t) => t,
            Err((status, why)) => return refused(status, &why),
        };
        // The decision is for the approval the operator was shown, and no other.
        let seen = form.get("digest").map(String::as_str).unwrap_or("");
        let waiting = waiting_approval(&task).and_then(|a| parse_handle(&a.handle).ok());
        if waiting.is_some_and(|(digest, _)| digest != seen) {
            return refused(
                StatusCode::CONFLICT,
                "this form is for another approval than the one this call waits for; \
                 nothing was done",
            );
        }
        let caller = Caller::new(task.principal.clone(), task.tenant.clone());
        let decision = (approve, Answerer::Operator(op.name.clone()));
        let tasks = self.shared.tasks.clone();
        match tasks
            .answer_waiting(&self.shared, &caller, &task, decision, None)
            .await
        {
            Ok(Answered::NotWaiting) => refused(
                StatusCode::CONFLICT,
                "this call no longer waits for approval; nothing was done",
            ),
            Ok(answered) => {
                tracing::info!(
                    operator = %op.name,
                    task = %task.task_id,
                    run = %task.run_id,
                    call = %task.call_id,
                    tool = %task.tool,
                    approved = approve,
                    refused = answered == Answered::Refused,
                    "console: an operator answered a call waiting for approval"
                );
                see_other(&format!("/console/task?id={}", query(&task.task_id)))
            }
            Err(_) => refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "the ledger could not be read; nothing was done",
            ),
        }
    }

    /// Task `id` of any caller.
    async fn find(&self, id: &str) -> Result<TaskRecord, (StatusCode, String)> {
        let rt = self.shared.runtime.clone();
        let task_id = id.to_owned();
        blocking(move || rt.tasks().any(&task_id))
            .await
            .map_err(unreadable)?
            .ok_or((
                StatusCode::NOT_FOUND,
                "no such task (or it expired)".to_string(),
            ))
    }

    fn risk(&self, tool: &str) -> String {
        self.shared
            .runtime
            .registry()
            .get(tool)
            .map_or("unknown".to_string(), |t| t.risk.as_str().to_string())
    }
}

/// The newest `max` of `all` (in order), and how many older ones were left out.
fn newest<T>(all: &[T], max: usize) -> (&[T], usize) {
    let skipped = all.len().saturating_sub(max);
    (&all[skipped..], skipped)
}

/// A page's title and body, or why it is not shown.
type Shown = Result<(String, String), (StatusCode, String)>;

fn unreadable<E>(_: E) -> (StatusCode, String) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the ledger could not be read now".to_string(),
    )
}

/// What a task's call is now: running, lost, or its result (the output shown as text).
fn call_state(task: &TaskRecord) -> String {
    let mut out = format!("<p>call <code>{}</code>: ", shown(&task.call_id));
    match &task.call {
        TaskCall::Running => out.push_str("<b id=\"state\">running</b></p>"),
        TaskCall::Lost => out.push_str("<b id=\"state\">lost</b> (its host stopped)</p>"),
        TaskCall::Finished(r) => {
            let status = r.status.as_str();
            let _ = write!(
                out,
                "<b id=\"state\" class=\"status-{status}\">{status}</b>{}</p>",
                r.code
                    .map(|c| format!(" <code id=\"code\">{}</code>", c.as_str()))
                    .unwrap_or_default()
            );
            if let Some(output) = &r.output {
                let pretty = serde_json::to_string_pretty(output).unwrap_or_default();
                let _ = write!(
                    out,
                    "<h2>Output</h2><pre id=\"output\">{}</pre>",
                    shown(&pretty)
                );
            } else {
                let _ = write!(out, "<p>{}</p>", shown(&r.message));
            }
            let _ = write!(
                out,
                "<p><a id=\"receipt\" href=\"/console/receipt?run={}&amp;call={}\">Its receipt</a></p>",
                query(&task.run_id),
                query(&task.call_id)
            );
        }
    }
    out
}

/// One call of a timeline: when, what, how it ended, every decision on its way.
fn timeline_entry(c: &CallRecord) -> String {
    let status = c.status.map_or("open", |s| s.as_str());
    let code = c
        .code
        .map(|c| format!(" <code>{}</code>", c.as_str()))
        .unwrap_or_default();
    let mut out = format!(
        "<li class=\"call\"><p><b>{}</b> · call <code>{}</code> · admitted {} · \
         <span class=\"status-{status}\">{status}</span>{code}",
        shown(&c.tool),
        shown(&c.call_id),
        rfc3339(c.admitted_at_ms),
    );
    if c.status.is_some() {
        let _ = write!(
            out,
            " · <a href=\"/console/receipt?run={}&amp;call={}\">receipt</a>",
            query(&c.run_id),
            query(&c.call_id)
        );
    }
    out.push_str("</p><table class=\"events\"><tbody>");
    for e in &c.events {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            rfc3339(e.at_ms),
            shown(&e.stage),
            shown(&e.decision),
            shown(&e.detail)
        );
    }
    out.push_str("</tbody></table></li>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A timeline keeps the newest calls up to its bound and says how many it left out.
    #[test]
    fn a_timeline_keeps_the_newest_calls() {
        let calls: Vec<u32> = (0..250).collect();
        let (kept, skipped) = newest(&calls, MAX_TIMELINE_CALLS);
        assert_eq!((kept.len(), skipped), (200, 50));
        assert_eq!(kept[0], 50);
        assert_eq!(newest(&calls[..3], MAX_TIMELINE_CALLS), (&calls[..3], 0));
    }
}
