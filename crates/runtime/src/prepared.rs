//! What is worked out once per call, before any stage reads it: the tool the call names as its
//! caller sees it, and the call's canonical form and fingerprint. A front door that needs
//! either before the pipeline runs (the wrapping of an MCP result, a task's mode, an agent's
//! repeat guard) reads it from the same [`Prepared`] it then hands to
//! [`Runtime::run_prepared`], so nothing is looked up or canonicalised twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use toolhost_contract::canonical::{canonical_call, CanonicalCall};
use toolhost_contract::{Caller, ToolCall};
use toolhost_registry::Tool;

use super::Runtime;

/// One call's tool and canonical form, worked out once ([`Runtime::prepare`]).
#[derive(Clone)]
pub struct Prepared {
    /// The registered tool the call names, if any; held for as long as the call runs.
    registered: Option<Arc<Tool>>,
    /// Whether the caller may see it (`Policy::may_see`).
    visible: bool,
    canonical: CanonicalCall,
    /// The digest of `canonical`: the call's fingerprint, whoever asks.
    fingerprint: String,
}

impl Prepared {
    /// The tool as the caller sees it: `None` when there is none, or when the policy hides it
    /// from them — the two are answered alike.
    pub fn tool(&self) -> Option<&Tool> {
        self.registered.as_deref().filter(|_| self.visible)
    }

    /// The tool the call names, whether or not its caller may see it: for the operator's
    /// records (the ledger's note, a metric's label), never for an answer.
    pub(super) fn registered(&self) -> Option<&Tool> {
        self.registered.as_deref()
    }

    /// The call's canonical form (tool and arguments).
    pub fn canonical(&self) -> &CanonicalCall {
        &self.canonical
    }

    /// The digest of the canonical call ([`toolhost_contract::canonical::call_digest`]): two
    /// calls with the same fingerprint are the same call.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// Whether this was prepared for `call`'s tool and arguments (debug builds check every
    /// hand-over).
    fn is_for(&self, call: &ToolCall) -> bool {
        self.canonical == canonical_call(&call.name, &call.arguments)
    }
}

/// Per-call work the pipeline does once, counted so that a test can prove it is done once
/// per call over every front door ([`Runtime::work`]).
#[derive(Debug, Default)]
pub(super) struct WorkCounts {
    resolutions: AtomicU64,
    canonical_forms: AtomicU64,
}

/// What [`Runtime::work`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Work {
    /// Tools looked up by name for a caller (a call's, or any other).
    pub resolutions: u64,
    /// Calls put in canonical form.
    pub canonical_forms: u64,
}

impl WorkCounts {
    pub(super) fn resolved(&self) {
        self.resolutions.fetch_add(1, Ordering::Relaxed);
    }

    fn canonicalised(&self) {
        self.canonical_forms.fetch_add(1, Ordering::Relaxed);
    }
}

impl Runtime {
    /// Work out `call`'s tool for `caller` and its canonical form, once; the pipeline and the
    /// front door read both from the result.
    pub fn prepare(&self, caller: &Caller, call: &ToolCall) -> Prepared {
        let served = self.served();
        let registered = served.registry.shared(&call.name);
        let visible = registered
            .as_deref()
            .is_some_and(|t| served.policy.may_see(caller, t.name.as_str(), t.risk));
        self.work.resolved();
        Prepared {
            registered,
            visible,
            ..self.canonical_only(call)
        }
    }

    /// `call`'s canonical form alone, for a call that is refused without looking at its tool.
    pub(super) fn canonical_only(&self, call: &ToolCall) -> Prepared {
        self.work.canonicalised();
        let canonical = canonical_call(&call.name, &call.arguments);
        Prepared {
            registered: None,
            visible: false,
            fingerprint: canonical.digest(),
            canonical,
        }
    }

    /// How many tools were resolved and calls canonicalised since this runtime started.
    pub fn work(&self) -> Work {
        Work {
            resolutions: self.work.resolutions.load(Ordering::Relaxed),
            canonical_forms: self.work.canonical_forms.load(Ordering::Relaxed),
        }
    }
}

/// Debug builds check that a [`Prepared`] handed to the pipeline is the one for its call.
pub(super) fn debug_check(prepared: &Prepared, call: &ToolCall) {
    debug_assert!(
        prepared.is_for(call),
        "a call run with another call's Prepared"
    );
}
