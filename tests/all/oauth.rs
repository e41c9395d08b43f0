//! `serve --http` as an OAuth 2.1 resource server, against a test issuer: an ES256 key made by
//! rcgen, its JWKS served on loopback, tokens minted with jsonwebtoken (a standard JOSE
//! library). A valid token calls as its `sub` (a token without the scope a tool needs gets
//! 403 `insufficient_scope`), also through the official MCP Python SDK's
//! clients; every broken one gets 401 with a `WWW-Authenticate` that points at the metadata
//! document; a flood of forged `kid`s does not make the host fetch the JWKS again.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::api_server::ApiServer;
use crate::call_context::downstream_config;
use crate::mcp_stateless::{call, http_post, routing_headers};

pub(crate) const ISSUER: &str = "https://id.test.example";
pub(crate) const AUDIENCE: &str = "https://mcp.test.example/mcp";
const METADATA: &str = "https://mcp.test.example/.well-known/oauth-protected-resource";

/// A signing key of the test issuer, published in its JWKS under `kid`.
pub(crate) struct Issuer {
    key: EncodingKey,
    /// The public key as a JWK.
    jwk: Value,
    /// The public key as bytes: what an attacker signs an HS256 token with.
    public: Vec<u8>,
}

/// A JWKS publishing these keys.
pub(crate) fn jwks(keys: &[&Issuer]) -> String {
    json!({ "keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>() }).to_string()
}

impl Issuer {
    pub(crate) fn new(kid: &str) -> Issuer {
        let pair = rcgen::KeyPair::generate().unwrap();
        let point = pair.public_key_raw().to_vec();
        assert_eq!(point.len(), 65, "an uncompressed P-256 point");
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let jwk = json!({
            "kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
            "x": b64(&point[1..33]), "y": b64(&point[33..]),
        });
        Issuer {
            key: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwk,
            public: point,
        }
    }

    /// A token with these claims over the defaults (a valid token for `alice` of `acme`).
    pub(crate) fn token(&self, kid: &str, claims: Value) -> String {
        let mut all = json!({
            "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "org": "acme",
            "iat": now(), "exp": now() + 600, "scope": "openid tools:identity",
        });
        all.as_object_mut()
            .unwrap()
            .extend(claims.as_object().cloned().unwrap_or_default());
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_string());
        jsonwebtoken::encode(&header, &all, &self.key).unwrap()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `[serve.oauth]` with the JWKS at `jwks_url`.
fn oauth_section(jwks_url: &str) -> String {
    oauth_section_with(jwks_url, "")
}

/// The same with `extra` keys in the section.
fn oauth_section_with(jwks_url: &str, extra: &str) -> String {
    format!(
        "[serve.oauth]\nissuer = {ISSUER:?}\naudience = {AUDIENCE:?}\njwks = {jwks_url:?}\n\
         tenant_claim = \"org\"\nscopes = {{ \"tools:identity\" = [\"whoami\"] }}\n{extra}"
    )
}

/// A `whoami` call with `token`: the HTTP status, the `WWW-Authenticate` header, the answer.
fn whoami(addr: &str, token: Option<&str>) -> (u16, Option<String>, String) {
    let nothing = json!({"principal": null, "tenant": null, "run-id": null, "call-id": null,
        "idempotency-key": null});
    let message = call(1, "whoami", nothing, "c1");
    let mut headers = routing_headers(&message);
    if let Some(t) = token {
        headers.push(("Authorization".into(), format!("Bearer {t}")));
    }
    let (status, h, body) = http_post(addr, &headers, &message).expect("an HTTP answer");
    (status, h.get("www-authenticate").cloned(), body)
}

/// GET `path`: status and body.
fn get(addr: &str, path: &str) -> (u16, String) {
    let (status, _, body) = crate::support::http_get(addr, path);
    (status, body)
}

/// A valid token calls as its `sub` and `org`; the metadata document names the issuer; a
/// missing token and each broken one get 401 and a challenge that names the document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_tokens_are_checked_and_refusals_point_at_the_metadata() {
    let issuer = Issuer::new("k1");
    let idp = ApiServer::serving(Some(jwks(&[&issuer]))).await;
    let dir = tempfile::tempdir().unwrap();
    let closed = ["127.0.0.1:9".to_string()];
    let top = oauth_section(&idp.url("/jwks"));
    let cfg = downstream_config(dir.path(), &top, &closed, &closed, "");
    let (http, addr) = tokio::task::spawn_blocking(move || {
        let http = crate::mcp_frames::Http::start(&cfg);
        let addr = http.addr.clone();
        (http, addr)
    })
    .await
    .unwrap();

    let valid = issuer.token("k1", json!({}));
    let a = addr.clone();
    let (status, _, body) = tokio::task::spawn_blocking(move || whoami(&a, Some(&valid)))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"principal\":\"oauth:alice\""), "{body}");
    assert!(body.contains("\"tenant\":\"acme\""), "{body}");

    let a = addr.clone();
    let (status, metadata) =
        tokio::task::spawn_blocking(move || get(&a, "/.well-known/oauth-protected-resource"))
            .await
            .unwrap();
    assert_eq!(status, 200);
    let metadata: Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(metadata["resource"], AUDIENCE);
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]));

    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let payload = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "root", "exp": now() + 600});
    let unsigned = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(payload.to_string().as_bytes())
    );
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("k1".into());
    let with_public_key =
        jsonwebtoken::encode(&hs, &payload, &EncodingKey::from_secret(&issuer.public)).unwrap();
    let tampered = {
        let t = issuer.token("k1", json!({}));
        let parts: Vec<&str> = t.split('.').collect();
        let forged = b64(
            json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "root", "org": "acme",
            "exp": now() + 600})
            .to_string()
            .as_bytes(),
        );
        format!("{}.{}.{}", parts[0], forged, parts[2])
    };
    let broken = [
        (
            "wrong issuer",
            issuer.token("k1", json!({"iss": "https://evil.example"})),
        ),
        (
            "wrong audience",
            issuer.token("k1", json!({"aud": "https://other.example/mcp"})),
        ),
        (
            "expired",
            issuer.token("k1", json!({"exp": now() - 3600, "iat": now() - 7200})),
        ),
        ("alg none", unsigned),
        ("HS256 with the public key", with_public_key),
        ("unknown kid", issuer.token("k2", json!({}))),
        ("tampered payload", tampered),
        ("no principal", issuer.token("k1", json!({"sub": ""}))),
        (
            "a principal past the bound once prefixed",
            issuer.token("k1", json!({"sub": "a".repeat(252)})),
        ),
        (
            "issued in the future",
            issuer.token("k1", json!({"iat": now() + 3600})),
        ),
        (
            "iat not a number",
            issuer.token("k1", json!({"iat": "yesterday"})),
        ),
    ];
    for (what, token) in broken {
        let a = addr.clone();
        let (status, challenge, body) =
            tokio::task::spawn_blocking(move || whoami(&a, Some(&token)))
                .await
                .unwrap();
        assert_eq!(status, 401, "{what}: {body}");
        let challenge = challenge.unwrap_or_default();
        assert!(
            challenge.starts_with("Bearer error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(
            challenge.contains(&format!("resource_metadata=\"{METADATA}\"")),
            "{what}: {challenge}"
        );
    }
    let a = addr.clone();
    let (status, challenge, _) = tokio::task::spawn_blocking(move || whoami(&a, None))
        .await
        .unwrap();
    assert_eq!(status, 401);
    assert_eq!(
        challenge.as_deref(),
        Some(format!("Bearer resource_metadata=\"{METADATA}\"").as_str())
    );

    // A valid token without the scope `whoami` needs: 403, naming the scope to step up to.
    let unscoped = issuer.token("k1", json!({"scope": "openid"}));
    let a = addr.clone();
    let (status, challenge, body) =
        tokio::task::spawn_blocking(move || whoami(&a, Some(&unscoped)))
            .await
            .unwrap();
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        challenge.as_deref(),
        Some(
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"tools:identity\", \
                 resource_metadata=\"{METADATA}\""
            )
            .as_str()
        )
    );
    assert_eq!(metadata["scopes_supported"], json!(["tools:identity"]));

    // A flood of forged key ids: the host loaded the key set once, at start.
    let before = idp.requests().len();
    for i in 0..40 {
        let token = issuer.token(&format!("forged-{i}"), json!({}));
        let a = addr.clone();
        let (status, _, _) = tokio::task::spawn_blocking(move || whoami(&a, Some(&token)))
            .await
            .unwrap();
        assert_eq!(status, 401);
    }
    let fetched: Vec<_> = idp
        .requests()
        .into_iter()
        .filter(|r| r.head.starts_with("GET /jwks"))
        .collect();
    assert_eq!(fetched.len(), 1, "one load at start, none per forged kid");
    assert_eq!(idp.requests().len(), before);

    // The official MCP Python SDK's clients (both eras) calling with the issuer's token.
    let (token, bad) = (issuer.token("k1", json!({})), issuer.token("k2", json!({})));
    let url = format!("http://{addr}/mcp");
    let facts = tokio::task::spawn_blocking(move || {
        let args = ["--url", &url, "--token", &token, "--bad-token", &bad];
        crate::mcp::client("oauth", &args).facts
    })
    .await
    .unwrap();
    assert_eq!(facts["principal"], "oauth:alice", "{facts}");
    assert_eq!(facts["issuer"], ISSUER, "{facts}");
    drop(http);
}

/// A key the issuer rotates in is found once the refetch interval has passed (the host reloads
/// the JWKS on the unknown kid), and a token of the new key then calls. One real-clock wait of
/// 1.5 s against a 1 s interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_in_key_is_found_after_the_refetch_interval() {
    let (old, new) = (Issuer::new("k1"), Issuer::new("k2"));
    let idp = ApiServer::serving(Some(jwks(&[&old]))).await;
    let dir = tempfile::tempdir().unwrap();
    let closed = ["127.0.0.1:9".to_string()];
    let top = oauth_section_with(&idp.url("/jwks"), "jwks_refetch_secs = 1\n");
    let cfg = downstream_config(dir.path(), &top, &closed, &closed, "");
    let http = tokio::task::spawn_blocking(move || crate::mcp_frames::Http::start(&cfg))
        .await
        .unwrap();
    let ask = |token: String| {
        let addr = http.addr.clone();
        tokio::task::spawn_blocking(move || whoami(&addr, Some(&token)).0)
    };
    assert_eq!(
        ask(new.token("k2", json!({}))).await.unwrap(),
        401,
        "not published yet"
    );
    idp.set_jwks(jwks(&[&old, &new]));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert_eq!(
        ask(new.token("k2", json!({}))).await.unwrap(),
        200,
        "found after a reload"
    );
    assert_eq!(
        ask(old.token("k1", json!({}))).await.unwrap(),
        200,
        "the old key still works"
    );
    let loads = idp
        .requests()
        .iter()
        .filter(|r| r.head.starts_with("GET /jwks"))
        .count();
    assert!((2..=3).contains(&loads), "{loads} loads");
}
