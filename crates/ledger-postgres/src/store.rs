//! Everything but the call path's writes, in PostgreSQL: the reads (is a call admitted, its
//! outcome, the listing, transcripts, approval requests), single-use tokens, the host's lease
//! and recovery of lapsed hosts' calls.
//!
//! The ledger's API is synchronous and is called from async workers too, so the store runs its
//! own small runtime (one worker thread) with its own connection: a method hands its query to
//! that runtime and waits for the answer on a channel, which is safe from any thread. The same
//! runtime renews this host's lease and, every half lease, closes the calls of hosts whose
//! lease has passed ([`PgStore::recover`]).

use crate::Db;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio_postgres::Client;

use super::lease::{lease_ms, prune_groups, prune_hosts, recover, renew};
use super::PgConfig;
use toolhost_contract::ToolResult;
use toolhost_ledger_store::chain::Evidence;
use toolhost_ledger_store::codec::{decode_result, from_sql_u64, to_sql_u64};
use toolhost_ledger_store::error::check_key;
use toolhost_ledger_store::store::TranscriptEntry;
use toolhost_ledger_store::{now_ms, LedgerError};

/// The store's connection, made again when the server dropped it (a restart, a network
/// failure): the next query after an outage reconnects, so hosts need no restart.
pub(super) struct Connector {
    config: PgConfig,
    /// The chain this connection's writes append to (`chain.rs`).
    chain: String,
    client: tokio::sync::Mutex<Option<Arc<Client>>>,
}

impl Connector {
    /// A connection that is still open, connecting again if the last one closed.
    pub(super) async fn get(&self) -> Result<Arc<Client>, LedgerError> {
        let mut slot = self.client.lock().await;
        if let Some(c) = slot.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        *slot = None;
        let fresh = Arc::new(self.config.connect_as(&self.chain).await?);
        *slot = Some(fresh.clone());
        Ok(fresh)
    }

    /// A connection of its own, for a read that needs a transaction (the shared one carries
    /// every other query meanwhile).
    pub(super) async fn own(&self) -> Result<Client, LedgerError> {
        self.config.connect_as(&self.chain).await
    }
}

/// How long one ledger operation may wait for the server before it fails (a host error for
/// the call; nothing runs unrecorded). Bounds a query on a connection the network cut
/// without closing it.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The reads, tokens, lease and recovery of a PostgreSQL ledger (see the module docs).
pub struct PgStore {
    runtime: Option<Runtime>,
    client: Arc<Connector>,
    owner: String,
    lease: Duration,
}

impl PgStore {
    /// Connect, migrate, and take this host's lease (`owner`, renewed every third of `lease`).
    pub fn start(
        config: &PgConfig,
        owner: String,
        lease: Duration,
    ) -> Result<PgStore, LedgerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("toolhost-ledger-pg")
            .enable_all()
            .build()?;
        let connecting = config.clone();
        let chain = format!("{owner}/store");
        let chain_at_start = chain.clone();
        // On the store's own runtime, waited for on a channel: the caller may itself be
        // inside a runtime, where blocking on another is refused.
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        runtime.spawn(async move {
            let connected = async {
                let mut client = connecting.connect_as(&chain_at_start).await?;
                super::migrate(&mut client, &connecting.schema).await?;
                Ok::<_, LedgerError>(client)
            };
            let _ = tx.send(connected.await);
        });
        let connected = rx.recv().unwrap_or_else(|_| {
            Err(LedgerError::Commit(
                "connecting to the ledger's server stopped".into(),
            ))
        });
        let client = match connected {
            Ok(client) => client,
            Err(e) => {
                runtime.shutdown_background();
                return Err(e);
            }
        };
        let store = PgStore {
            runtime: Some(runtime),
            client: Arc::new(Connector {
                config: config.clone(),
                chain,
                client: tokio::sync::Mutex::new(Some(Arc::new(client))),
            }),
            owner,
            lease,
        };
        store.renew_lease()?;
        store.spawn_upkeep();
        Ok(store)
    }

    fn runtime(&self) -> &Runtime {
        // Only `Drop` takes it.
        self.runtime
            .as_ref()
            .expect("the store's runtime runs until drop")
    }

    /// Run `work` on the store's runtime and wait for it (from any thread).
    pub(super) fn run<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, LedgerError>> + Send + 'static,
    ) -> Result<T, LedgerError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime().spawn(async move {
            let answer = tokio::time::timeout(OPERATION_TIMEOUT, work)
                .await
                .unwrap_or_else(|_| {
                    Err(LedgerError::Commit(format!(
                        "the ledger's server did not answer within {} s",
                        OPERATION_TIMEOUT.as_secs()
                    )))
                });
            let _ = tx.send(answer);
        });
        rx.recv().unwrap_or_else(|_| {
            Err(LedgerError::Commit(
                "the ledger's server connection stopped".into(),
            ))
        })
    }

    /// [`run`](Self::run) for an async caller: the work runs on the store's runtime and the
    /// caller awaits it without holding its own worker.
    pub(super) async fn run_async<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, LedgerError>> + Send + 'static,
    ) -> Result<T, LedgerError> {
        let handle = self.runtime().spawn(async move {
            tokio::time::timeout(OPERATION_TIMEOUT, work)
                .await
                .unwrap_or_else(|_| {
                    Err(LedgerError::Commit(format!(
                        "the ledger's server did not answer within {} s",
                        OPERATION_TIMEOUT.as_secs()
                    )))
                })
        });
        handle.await.unwrap_or_else(|_| {
            Err(LedgerError::Commit(
                "the ledger's server connection stopped".into(),
            ))
        })
    }

    pub(super) fn connector(&self) -> Arc<Connector> {
        self.client.clone()
    }

    /// Take or extend this host's lease by the database's clock.
    fn renew_lease(&self) -> Result<(), LedgerError> {
        let (c, owner, ms) = (self.connector(), self.owner.clone(), lease_ms(self.lease));
        self.run(async move { renew(&*c.get().await?, &owner, ms).await })
    }

    /// Renew the lease every third of its length, and recover lapsed hosts' calls every half.
    fn spawn_upkeep(&self) {
        let (c, owner, lease) = (self.connector(), self.owner.clone(), self.lease);
        self.runtime().spawn(async move {
            // The first ticks come one period in: `start` has just taken the lease, and the
            // runtime recovers at start-up (`config/build.rs`).
            let now = tokio::time::Instant::now();
            let mut renew_every = tokio::time::interval_at(now + lease / 3, lease / 3);
            let mut recover_every = tokio::time::interval_at(now + lease / 2, lease / 2);
            loop {
                tokio::select! {
                    _ = renew_every.tick() => {
                        // A failed renewal is retried at the next tick; if the lease lapses
                        // meanwhile, other hosts close this host's open calls and its own
                        // outcomes for them are refused (`AlreadyFinished`).
                        if let Ok(client) = c.get().await {
                            let _ = renew(&client, &owner, lease_ms(lease)).await;
                        }
                    }
                    _ = recover_every.tick() => {
                        if let Ok(client) = c.get().await {
                            let _ = recover(&client).await;
                            let _ = prune_groups(&client).await;
                            let _ = prune_hosts(&client).await;
                        }
                    }
                }
            }
        });
    }

    /// This host's lease owner id (the `owner` of the calls it admits).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The settings the store connects with.
    pub(super) fn config(&self) -> &PgConfig {
        &self.client.config
    }

    pub fn is_admitted(&self, run_id: &str, call_id: &str) -> Result<bool, LedgerError> {
        self.run(self.admitted_query(run_id, call_id))
    }

    /// [`is_admitted`](Self::is_admitted) without holding the caller's worker.
    pub async fn is_admitted_async(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<bool, LedgerError> {
        self.run_async(self.admitted_query(run_id, call_id)).await
    }

    fn admitted_query(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> impl Future<Output = Result<bool, LedgerError>> + Send + 'static {
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        async move {
            let c = c.get().await?;
            Ok(c.query_opt(
                "SELECT 1 FROM calls WHERE run_id = $1 AND call_id = $2",
                &[&r, &k],
            )
            .await
            .db()?
            .is_some())
        }
    }

    /// The admission digest of `(run_id, call_id)`, if it was admitted.
    pub async fn admitted_digest(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<String>, LedgerError> {
        self.run_async(self.digest_query(run_id, call_id)).await
    }

    fn digest_query(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> impl Future<Output = Result<Option<String>, LedgerError>> + Send + 'static {
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        async move {
            let c = c.get().await?;
            Ok(c.query_opt(
                "SELECT args_digest FROM calls WHERE run_id = $1 AND call_id = $2",
                &[&r, &k],
            )
            .await
            .db()?
            .map(|row| row.get::<_, String>(0)))
        }
    }

    pub fn outcome(&self, run_id: &str, call_id: &str) -> Result<Option<ToolResult>, LedgerError> {
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        self.run(async move {
            let c = c.get().await?;
            let row = c
                .query_opt(
                    "SELECT COALESCE(r.result_json, c.result_json) FROM calls c
                     LEFT JOIN reconciliations r ON r.run_id = c.run_id AND r.call_id = c.call_id
                     WHERE c.run_id = $1 AND c.call_id = $2",
                    &[&r, &k],
                )
                .await
                .db()?;
            match row {
                None => Err(LedgerError::unknown(&r, &k)),
                Some(row) => row
                    .get::<_, Option<String>>(0)
                    .as_deref()
                    .map(decode_result)
                    .transpose(),
            }
        })
    }

    pub fn record_content(
        &self,
        run_id: &str,
        call_id: &str,
        json: String,
    ) -> Result<bool, LedgerError> {
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        self.run(async move {
            let c = c.get().await?;
            if c.query_opt(
                "SELECT 1 FROM calls WHERE run_id = $1 AND call_id = $2",
                &[&r, &k],
            )
            .await
            .db()?
            .is_none()
            {
                return Err(LedgerError::unknown(&r, &k));
            }
            let n = c
                .execute(
                    "INSERT INTO call_content (run_id, call_id, arguments_json, recorded_at_ms)
                     VALUES ($1, $2, $3, $4) ON CONFLICT (run_id, call_id) DO NOTHING",
                    &[&r, &k, &json, &now_ms()],
                )
                .await
                .db()?;
            Ok(n == 1)
        })
    }

    pub fn transcript(
        &self,
        run_id: &str,
        step: u32,
        kind: &str,
        digest: &str,
        size: u64,
        detail: &str,
    ) -> Result<(), LedgerError> {
        check_key(run_id, "", "")?;
        let c = self.connector();
        let (r, kind, digest) = (run_id.to_owned(), kind.to_owned(), digest.to_owned());
        let detail = detail.to_owned();
        self.run(async move {
            let c = c.get().await?;
            c.execute(
                "INSERT INTO transcript (run_id, step, kind, digest, size, at_ms, detail)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &[
                    &r,
                    &i64::from(step),
                    &kind,
                    &digest,
                    &to_sql_u64(size),
                    &now_ms(),
                    &detail,
                ],
            )
            .await
            .db()?;
            Ok(())
        })
    }

    /// Every chain link, head and chained row, read in one snapshot on a connection of its own.
    pub fn chain_evidence(&self) -> Result<Evidence, LedgerError> {
        let c = self.connector();
        self.run(async move { super::chain::evidence(&mut c.own().await?).await })
    }

    /// One call's links and chained rows, read in one snapshot on a connection of its own.
    pub fn chain_of_call(&self, run_id: &str, call_id: &str) -> Result<Evidence, LedgerError> {
        let (c, r, k) = (self.connector(), run_id.to_owned(), call_id.to_owned());
        self.run(async move { super::chain::evidence_of_call(&mut c.own().await?, &r, &k).await })
    }

    pub fn transcript_entries(&self, run_id: &str) -> Result<Vec<TranscriptEntry>, LedgerError> {
        let (c, r) = (self.connector(), run_id.to_owned());
        self.run(async move {
            let c = c.get().await?;
            let rows = c
                .query(
                    "SELECT run_id, step, kind, digest, size, at_ms, detail FROM transcript
                     WHERE run_id = $1 ORDER BY step, id",
                    &[&r],
                )
                .await
                .db()?;
            rows.into_iter()
                .map(|row| {
                    let step: i64 = row.get(1);
                    Ok(TranscriptEntry {
                        run_id: row.get(0),
                        step: u32::try_from(step)
                            .map_err(|_| LedgerError::Corrupt(format!("transcript step {step}")))?,
                        kind: row.get(2),
                        digest: row.get(3),
                        size: from_sql_u64("transcript size", row.get(4))?,
                        at_ms: row.get(5),
                        detail: row.get(6),
                    })
                })
                .collect()
        })
    }

    pub fn approval_request(&self, digest: &str) -> Result<Option<(String, String)>, LedgerError> {
        let (c, d) = (self.connector(), digest.to_owned());
        self.run(async move {
            let c = c.get().await?;
            Ok(c.query_opt(
                "SELECT run_id, call_id FROM approval_requests WHERE digest = $1",
                &[&d],
            )
            .await
            .db()?
            .map(|row| (row.get(0), row.get(1))))
        })
    }

    /// Forget the answers of groups too old to be sent again, and hosts whose lease passed
    /// long ago with no open call left: `(groups, hosts)` forgotten. The upkeep runs the same
    /// statements every half lease; this is the tests' handle on them.
    #[cfg(test)]
    pub fn prune(&self) -> Result<(u64, u64), LedgerError> {
        let c = self.connector();
        self.run(async move {
            let c = c.get().await?;
            Ok((prune_groups(&c).await?, prune_hosts(&c).await?))
        })
    }

    /// Close, as `outcome_unknown`, every open call whose host's lease has passed (or that has
    /// no host), and return them. Calls of hosts that hold their lease are left alone; a call
    /// another host is closing right now is skipped, not waited for.
    pub fn recover(&self) -> Result<Vec<(String, String)>, LedgerError> {
        let c = self.connector();
        self.run(async move { recover(&*c.get().await?).await })
    }
}

impl Drop for PgStore {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is refused inside an async context: let its thread
        // wind down on its own. The lease is left to lapse.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}
