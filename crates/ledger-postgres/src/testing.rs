//! A schema of a test's own on the test server (`TOOLHOST_TEST_POSTGRES_URL`), for this
//! crate's tests and the ledger's (feature `testing`).

use crate::{PgBackend, PgConfig};

const NEEDS_SERVER: &str = "set TOOLHOST_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/test) and run with --ignored";

/// A schema of the test's own on the test server, dropped when the test ends.
pub struct TestSchema {
    pub config: PgConfig,
}

impl TestSchema {
    /// A fresh schema name on the server `TOOLHOST_TEST_POSTGRES_URL` names (a schema is made on
    /// a server, so there is no `Default`).
    #[allow(clippy::new_without_default)]
    pub fn new() -> TestSchema {
        let url = std::env::var("TOOLHOST_TEST_POSTGRES_URL").expect(NEEDS_SERVER);
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        TestSchema {
            config: PgConfig {
                url,
                password_env: None,
                schema,
                ca_file: None,
            },
        }
    }

    /// A backend on its own connection, as one host would have.
    pub fn host(&self, owner: &str) -> PgBackend {
        PgBackend::connect(&self.config, owner.into()).expect("the test server answers")
    }

    /// Run `sql` on a fresh connection and return the first column of each row, as text.
    pub fn query(&self, sql: &str) -> Vec<String> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let client = self.config.connect().await.unwrap();
            client
                .simple_query(sql)
                .await
                .unwrap()
                .into_iter()
                .filter_map(|m| match m {
                    tokio_postgres::SimpleQueryMessage::Row(r) => {
                        Some(r.get(0).unwrap_or("NULL").to_owned())
                    }
                    _ => None,
                })
                .collect()
        })
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let schema = self.config.schema.clone();
        let _ = std::panic::catch_unwind(|| self.query(&format!("DROP SCHEMA {schema} CASCADE")));
    }
}
