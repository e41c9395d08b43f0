//! What `toolhost check-config` prints: every setting as it takes effect, every default made
//! explicit, and each tool as the registry built it (name, risk, whether calls need approval,
//! limits, grants).

use serde_json::{json, Value};

use super::{Checked, Config, LockStatus};
use crate::policy::needs_approval;
use crate::sandbox::Limits;

fn limits(l: &Limits) -> Value {
    json!({
        "fuel": l.fuel,
        "deadline_ms": l.deadline.as_millis() as u64,
        "memory_bytes": l.memory_bytes,
        "table_elements": l.table_elements,
        "output_bytes": l.output_bytes,
        "disk_reserve_bytes": l.disk_reserve_bytes,
        "write_bytes": l.write_bytes,
    })
}

impl Config {
    /// The effective settings of this (checked) config and the tools loaded from it.
    pub fn effective(&self, checked: &Checked) -> Value {
        let registry = &checked.registry;
        let data = self.data_dir();
        let policy_given = self.policy.is_some();
        let policy = self.policy.clone().unwrap_or_default();
        let key = crate::policy::approval_key_path(self.policy.as_ref(), &self.base_dir, &data);
        let run = &self.run;
        let components: Vec<Value> = self
            .components
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "path": c.path.as_ref().map(|p| self.base_dir.join(p).display().to_string()),
                    "oci": c.oci.as_ref().map(ToString::to_string),
                    // Declared only; each tool says what it runs as (below).
                    "risk": c.risk,
                    "signed_by": c.signed_by,
                    // The key whose signature was verified at this check, if one had to be.
                    "verified_signer": registry.signers.get(i).cloned().flatten(),
                    "limits": limits(&self.default_limits().with(&c.limits)),
                    "fs": c.fs.iter().map(|g| json!({
                        "host": self.base_dir.join(&g.host).display().to_string(),
                        "guest": g.guest.as_str(),
                        "mode": if g.mode == crate::registry::config::FsMode::ReadWrite { "rw" } else { "ro" },
                    })).collect::<Vec<_>>(),
                    "network": c.network.as_ref().map(|n| json!({
                        "allow": n.allow.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
                        "dns": n.dns,
                    })),
                    // Where each value comes from and where it may go; never a value.
                    "secrets": c.secrets.iter().map(|s| json!({
                        "name": s.name.as_str(),
                        "env": s.env,
                        "file": s.file.as_ref().map(|f| self.base_dir.join(f).display().to_string()),
                        "hosts": s.hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let approvers = policy.approval.approvers;
        let tools: Vec<Value> = registry
            .tools()
            .map(|t| {
                json!({
                    "name": t.name.as_str(),
                    "export": t.export,
                    "risk": t.risk,
                    "risk_from": t.risk_from,
                    "approval": t.approval,
                    "needs_approval": needs_approval(t.approval, t.risk),
                    "approvers": t.approvers.unwrap_or(approvers),
                    "limits": limits(&t.limits),
                    "fs": t.grant.dirs.iter().map(|d| json!({
                        "guest": d.guest,
                        "writable": d.writable,
                    })).collect::<Vec<_>>(),
                    "network": t.grant.has_network(),
                    "secrets": t.grant.secrets.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({
            "file": self.file_name(),
            "data_dir": data.display().to_string(),
            "cache_dir": self.cache_dir().display().to_string(),
            "limits": limits(&self.default_limits()),
            "run": {
                "max_calls": run.max_calls,
                "max_calls_per_tool": run.max_calls_per_tool,
                "max_concurrent_calls": run.concurrent_calls(),
                "rate_per_principal": run.rate_per_principal,
                "rate_burst": run.rate_burst,
            },
            "ledger": self.ledger,
            "policy": {
                "section_given": policy_given,
                "default": policy.default,
                "rule": policy.rules,
                "approval": {
                    "key_file": key.display().to_string(),
                    "ttl_secs": policy.approval.ttl_secs,
                },
            },
            "serve": {
                "principal": self.serve.principal,
                "tenant": self.serve.tenant,
                "allowed_hosts": self.serve.allowed_hosts,
                "allowed_origins": self.serve.allowed_origins,
                "stream_lifetime_secs": self.serve.stream_lifetime_secs,
                "session_idle_secs": self.serve.session_idle_secs,
                "task_ttl_secs": self.serve.task_ttl_secs,
                "tools_list_ttl_secs": self.serve.tools_list_ttl_secs,
                "open_tasks_per_caller": self.serve.open_tasks_per_caller,
                "task_bytes_per_caller": self.serve.task_bytes_per_caller,
                "requests_per_second": self.serve.requests_per_second,
                "request_burst": self.serve.request_burst,
                "requests_in_flight": self.serve.requests_in_flight,
                "connections_per_principal": self.serve.connections_per_principal,
                "tokens": self.serve.tokens.iter().map(|t| json!({
                    "principal": t.principal,
                    "tenant": t.tenant,
                })).collect::<Vec<_>>(),
                "oauth": self.serve.oauth.as_ref().map(|o| json!({
                    "issuer": o.issuer,
                    "audience": o.audience,
                    "jwks": o.jwks,
                    "principal_claim": o.principal_claim,
                    "tenant_claim": o.tenant_claim,
                    "scopes": o.scopes,
                    "jwks_refetch_secs": o.jwks_refetch_secs,
                    "metadata": o.metadata_url(),
                })),
            },
            "agent": self.agent,
            "telemetry": {
                "otlp_endpoint": self.telemetry.otlp_endpoint,
                "exported": match self.telemetry.endpoint() {
                    Some(crate::telemetry::Endpoint::Configured(e)) => Some(format!("{}/v1/traces", e.trim_end_matches('/'))),
                    Some(crate::telemetry::Endpoint::Environment) => Some("OTEL_EXPORTER_OTLP_ENDPOINT".to_string()),
                    None => None,
                },
            },
            "lock": lock(&checked.lock),
            "trust": {
                "require": match self.trust.require {
                    crate::registry::trust::Require::Signed => "signed",
                    crate::registry::trust::Require::Optional => "optional",
                },
                "keys": self.trust.keys.iter().map(|(name, path)| {
                    (name.clone(), json!(self.base_dir.join(path).display().to_string()))
                }).collect::<serde_json::Map<_, _>>(),
            },
            "oci": {
                "max_manifest_bytes": self.oci.max_manifest_bytes(),
                "max_blob_bytes": self.oci.max_blob_bytes(),
                "timeout_secs": self.oci.timeout().as_secs(),
                "docker_credentials": self.oci.docker_credentials.unwrap_or(true),
                "store": self.oci_store().dir().display().to_string(),
                "registries": self.oci.registries.iter().map(|(host, r)| {
                    (host.clone(), json!({
                        "insecure": r.insecure,
                        "username": r.username,
                        "password_env": r.password_env,
                        "password_file": r.password_file.as_ref().map(|f| self.base_dir.join(f).display().to_string()),
                        "redirect_hosts": r.redirect_hosts,
                    }))
                }).collect::<serde_json::Map<_, _>>(),
            },
            "component": components,
            "tools": tools,
        })
    }
}

/// Whether what runs is pinned, and by which file.
fn lock(status: &LockStatus) -> Value {
    match status {
        LockStatus::Pinned(p) => json!({"file": p.display().to_string(), "pinned": true}),
        LockStatus::Absent(p) => json!({
            "file": p.display().to_string(),
            "pinned": false,
            "note": "no lock file: components and tool definitions are not pinned; `toolhost lock` writes one",
        }),
        LockStatus::NoFile | LockStatus::Unchecked => Value::Null,
    }
}
