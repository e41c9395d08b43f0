//! Every way an approval token can fail has its own stable code: a forged token, one minted
//! for other arguments, one already used, one minted for another principal; a correct token
//! still runs its call exactly once.

use serde_json::{json, Value};
use toolhost::{Code, RunContext, Runtime, Status, ToolCall, ToolResult};

struct Env {
    _dir: tempfile::TempDir,
    rt: Runtime,
    workspace: std::path::PathBuf,
}

/// `write_text` needs an approval; a fresh data directory (ledger, key) and workspace.
fn env() -> Env {
    let (dir, config, ws) = crate::support::approval_config(None);
    Env {
        rt: crate::support::runtime(&config),
        _dir: dir,
        workspace: ws,
    }
}

fn write(id: &str, content: &str) -> ToolCall {
    ToolCall {
        call_id: id.to_string(),
        name: "write_text".to_string(),
        arguments: json!({"path": "note.txt", "content": content}),
    }
}

/// Ask for an approval of `call` as `ctx`, and mint its token as a human would.
async fn approved(rt: &Runtime, ctx: &RunContext, call: &ToolCall) -> String {
    let r = rt.run_call(ctx, call, None).await;
    assert_eq!(r.code, Some(Code::ApprovalRequired), "{r:?}");
    let handle = r.approval.expect("an approval request").handle;
    rt.approvals()
        .mint(&handle)
        .expect("the handle was asked for")
}

/// The result failed with exactly `code`, ran nothing, and its message names no token part.
fn refused(rt: &Runtime, r: &ToolResult, code: Code, token: &str) {
    assert_eq!(r.status, Status::Failed, "{r:?}");
    assert_eq!(r.code, Some(code), "{r:?}");
    assert_eq!(rt.executions(), 0, "{r:?}");
    for part in token.split('.') {
        assert!(!r.message.contains(part), "{part} in {}", r.message);
    }
    let json: Value = serde_json::to_value(r).unwrap();
    assert_eq!(
        (json["status"].as_str(), json["code"].as_str()),
        (Some("failed"), Some(code.as_str()))
    );
}

/// A forged token (altered MAC, a malformed one), a token for other arguments, a token for
/// another principal and a reused token each end with their own code and `status: failed`,
/// and the ledger's approve decision says the same; the correct token completes once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_approval_failure_has_its_own_code() {
    let e = env();
    let rt = &e.rt;
    let alice = rt.context("alice", "acme");
    let mut bob = rt.context("bob", "acme");
    bob.run_id = alice.run_id.clone();
    let token = approved(rt, &alice, &write("a1", "approved")).await;

    // Forged: the genuine token with one MAC digit changed, and a token of the wrong shape.
    let (bindings, mac) = token.rsplit_once('.').unwrap();
    let flipped = if mac.ends_with('0') { '1' } else { '0' };
    let forged = format!("{bindings}.{}{flipped}", &mac[..mac.len() - 1]);
    for (id, bad) in [("f1", forged.as_str()), ("f2", "123.abc")] {
        let r = rt.run_call(&alice, &write(id, "approved"), Some(bad)).await;
        refused(rt, &r, Code::ApprovalInvalid, &token);
    }

    // Minted for other arguments.
    let r = rt
        .run_call(&alice, &write("m1", "tampered"), Some(&token))
        .await;
    refused(rt, &r, Code::ApprovalMismatch, &token);

    // Minted for another principal (bob asked for the same call in the same run).
    let bobs = approved(rt, &bob, &write("b1", "approved")).await;
    assert_ne!(bobs, token);
    let r = rt
        .run_call(&alice, &write("w1", "approved"), Some(&bobs))
        .await;
    refused(rt, &r, Code::ApprovalWrongPrincipal, &bobs);

    // The correct token still completes, once.
    let r = rt
        .run_call(&alice, &write("ok", "approved"), Some(&token))
        .await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(rt.executions(), 1);
    assert_eq!(
        std::fs::read_to_string(e.workspace.join("note.txt")).unwrap(),
        "approved"
    );

    // Reused.
    let r = rt
        .run_call(&alice, &write("again", "approved"), Some(&token))
        .await;
    assert_eq!(
        (r.status, r.code),
        (Status::Failed, Some(Code::ApprovalReused))
    );
    assert_eq!(rt.executions(), 1);

    // The ledger's approve decision carries each code, and every message differs.
    let calls = rt.ledger().calls(Some(&alice.run_id)).unwrap();
    let decision = |id: &str| {
        let c = calls.iter().find(|c| c.call_id == id).unwrap();
        let e = c.events.iter().find(|e| e.stage == "approve").unwrap();
        (e.decision.clone(), c.message.clone().unwrap_or_default())
    };
    let rows: Vec<(String, String)> = ["f1", "m1", "w1", "again"]
        .iter()
        .map(|id| decision(id))
        .collect();
    let decisions: Vec<&str> = rows.iter().map(|(d, _)| d.as_str()).collect();
    assert_eq!(
        decisions,
        [
            "approval_invalid",
            "approval_mismatch",
            "approval_wrong_principal",
            "approval_reused"
        ]
    );
    let messages: std::collections::HashSet<&str> = rows.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(messages.len(), 4, "{rows:?}");
    // The approved call says how it was approved: which approval, passed with the call.
    let ok = calls.iter().find(|c| c.call_id == "ok").unwrap();
    let approved = ok.events.iter().find(|e| e.stage == "approve").unwrap();
    assert_eq!(approved.decision, "approved");
    assert!(
        approved
            .detail
            .starts_with("by a token passed with the call (approval "),
        "{approved:?}"
    );
}

/// An approver that approves every call it is asked about, on `channel`'s behalf.
struct AlwaysYes(
    toolhost::contract::Approvers,
    std::sync::atomic::AtomicUsize,
);

impl toolhost::contract::Approver for AlwaysYes {
    fn channel(&self) -> toolhost::contract::Approvers {
        self.0
    }

    fn source(&self) -> String {
        "a test".into()
    }

    fn ask<'a>(
        &'a self,
        _: &'a toolhost::contract::ApprovalPrompt,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = toolhost::contract::ApprovalAnswer> + Send + 'a>,
    > {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(std::future::ready(
            toolhost::contract::ApprovalAnswer::Approved,
        ))
    }
}

/// With `approvers = "operator"`, the calling client's approver is never asked and the call
/// ends `approval_required`, nothing run; the operator's channel approves it; with the default
/// (`client`) the client's approver is asked and its yes runs the call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_operator_approves_an_operator_tool() {
    use toolhost::contract::{ApproverHandle, Approvers};
    let (_dir, config, ws) = crate::support::approval_config(None);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "approval = \"required\"\n",
            "approval = \"required\"\napprovers = \"operator\"\n",
        ),
    )
    .unwrap();
    let rt = crate::support::runtime(&config);
    let with = |channel: Approvers| {
        let yes = std::sync::Arc::new(AlwaysYes(channel, Default::default()));
        let mut ctx = rt.context("alice", "acme");
        ctx.run_id = "r".into();
        ctx.approver = Some(ApproverHandle(yes.clone()));
        (ctx, yes)
    };
    let (ctx, client) = with(Approvers::Client);
    let r = rt
        .run_call(&ctx, &write("c1", "from the client"), None)
        .await;
    assert_eq!(r.code, Some(Code::ApprovalRequired), "{r:?}");
    assert_eq!(client.1.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_eq!(rt.executions(), 0);
    assert!(!ws.join("note.txt").exists());
    let (ctx, operator) = with(Approvers::Operator);
    let r = rt
        .run_call(&ctx, &write("c2", "from the operator"), None)
        .await;
    assert_eq!(r.status, Status::Completed, "{r:?}");
    assert_eq!(operator.1.load(std::sync::atomic::Ordering::SeqCst), 1);

    let (_d2, config, _ws2) = crate::support::approval_config(None);
    let rt = crate::support::runtime(&config);
    let yes = std::sync::Arc::new(AlwaysYes(Approvers::Client, Default::default()));
    let mut ctx = rt.context("alice", "acme");
    ctx.approver = Some(ApproverHandle(yes));
    let r = rt.run_call(&ctx, &write("c3", "default"), None).await;
    assert_eq!(
        r.status,
        Status::Completed,
        "by default the client may approve: {r:?}"
    );
}
