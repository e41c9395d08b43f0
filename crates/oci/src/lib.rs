//! Components from OCI registries: references (`reference.rs`), the `[oci]` section
//! (`config.rs`), one registry's HTTP session with its credentials, redirects and caps
//! (`session.rs`, credentials from `docker.rs`), pulling a component checked against its
//! digests (`pull.rs`), publishing one (`push.rs`), and the content-addressed store that lets a
//! host start without the registry (`store.rs`).
//!
//! # Layout
//!
//! A crate of its own beside the sandbox: it uses the contract only. The host's config layer
//! pulls every `oci =` component before the registry loads anything, and hands the registry
//! bytes that already match their digests.
//!
//! The artifact layout is the CNCF Wasm OCI artifact one (`wkg`, Wassette): an OCI image
//! manifest whose config is `application/vnd.wasm.config.v0+json` (or the OCI empty config)
//! and whose one layer is `application/wasm`. Anything else is refused.
//!
//! The client is written over `reqwest` (already built for the agent and OTLP) rather than
//! taken from `oci-client`: that crate brings a second `reqwest` and its own TLS stack, reads
//! manifests with no size cap and follows redirects to any host, and the pull path needs only
//! two GETs, a token exchange and a push of three objects.

mod config;
pub mod cosign;
mod docker;
mod error;
mod pull;
mod push;
mod reference;
mod session;
mod store;

use std::path::{Path, PathBuf};

pub use config::{
    OciConfig, RegistryConfig, DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_MANIFEST_BYTES,
    DEFAULT_TIMEOUT_SECS, MAX_REDIRECTS,
};
pub use error::OciError;
pub use pull::{Origin, Pulled};
pub use reference::Reference;
pub use store::Store;
pub use toolhost_contract::Sha256Digest;

/// The OCI image manifest media type, the only manifest accepted.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The Wasm artifact config media type.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The OCI empty config, which `oras push` writes; also accepted.
pub const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
/// The one layer of a component artifact.
pub const WASM_LAYER: &str = "application/wasm";

/// Pulls and pushes under an `[oci]` section.
#[derive(Debug, Clone)]
pub struct OciClient {
    config: OciConfig,
    /// Where `password_file` paths resolve (the config file's directory).
    base_dir: PathBuf,
}

/// One component to fetch: its reference, the manifest digest a lock pins for it, and whether
/// its cosign signatures are wanted too.
pub struct Wanted {
    pub reference: Reference,
    pub pinned: Option<Sha256Digest>,
    pub signatures: bool,
}

impl OciClient {
    pub fn new(config: &OciConfig, base_dir: &Path) -> OciClient {
        OciClient {
            config: config.clone(),
            base_dir: base_dir.to_path_buf(),
        }
    }

    /// [`OciClient::pull`] each of `wanted` in turn, from a caller that is not async (or is,
    /// on another runtime). The first failure is returned with the index of its component.
    pub fn pull_all_blocking(
        &self,
        wanted: &[Wanted],
        resolve_tags: bool,
        store: Option<&Store>,
    ) -> Result<Vec<Pulled>, (usize, OciError)> {
        let Some(first) = wanted.first() else {
            return Ok(Vec::new());
        };
        on_own_thread(
            || async {
                let mut out = Vec::with_capacity(wanted.len());
                for (i, w) in wanted.iter().enumerate() {
                    out.push(
                        self.pull(w, resolve_tags, store)
                            .await
                            .map_err(|e| (i, e))?,
                    );
                }
                Ok(out)
            },
            |e| (0, no_runtime(&first.reference, e)),
        )
    }

    /// [`OciClient::push_signature`] from a caller that is not async.
    pub fn push_signature_blocking(
        &self,
        r: &Reference,
        payload: &[u8],
        signature: &str,
    ) -> Result<(), OciError> {
        on_own_thread(
            || self.push_signature(r, payload, signature),
            |e| no_runtime(r, e),
        )
    }

    /// [`OciClient::push`] from a caller that is not async.
    pub fn push_blocking(&self, component: &[u8], r: &Reference) -> Result<Sha256Digest, OciError> {
        on_own_thread(|| self.push(component, r), |e| no_runtime(r, e))
    }
}

/// Run the future `work` makes on a current-thread runtime of its own, on a thread of its own,
/// and wait for it: callers that are not async, or are on another runtime, can use it.
fn on_own_thread<T, E, F>(
    work: impl FnOnce() -> F + Send,
    no_runtime: impl FnOnce(std::io::Error) -> E + Send,
) -> Result<T, E>
where
    F: std::future::Future<Output = Result<T, E>>,
    T: Send,
    E: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt.block_on(work()),
                    Err(e) => Err(no_runtime(e)),
                }
            })
            .join()
            .expect("the request thread does not panic")
    })
}

fn no_runtime(r: &Reference, e: std::io::Error) -> OciError {
    OciError::Unreachable {
        registry: r.registry.clone(),
        message: format!("no runtime for the request: {e}"),
    }
}
