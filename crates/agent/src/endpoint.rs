//! Where the model endpoint is, and which API it speaks: a base URL as OpenAI and Anthropic
//! clients take it, and `--api` (or what the base URL names unambiguously).

use super::provider_error::ProviderError;
use super::wire::Api;

/// Where the model endpoint is.
#[derive(Debug, Clone)]
pub struct Endpoint {
    api: Api,
    tls: bool,
    host: String,
    port: u16,
    /// The request path, e.g. `/v1/chat/completions`, `/v1/responses`, `/v1/messages`.
    path: String,
    /// The base URL's query, kept whole (Azure OpenAI's `api-version=…`).
    query: Option<String>,
}

impl Endpoint {
    /// `base_url` as OpenAI clients take it (`https://api.example.com/v1`,
    /// `http://127.0.0.1:8080/v1`), speaking Chat Completions; see [`Endpoint::parse_for`].
    pub fn parse(base_url: &str) -> Result<Endpoint, ProviderError> {
        Endpoint::parse_for(base_url, None)
    }

    /// `base_url` for `api`: the API's path (`/chat/completions`, `/responses`, `/messages`)
    /// is appended to the base URL's path unless the path already ends in it, and its query
    /// (`?api-version=…`) is kept. Without `api`, the API is the one the base URL names
    /// unambiguously (its path, or Anthropic's host), else Chat Completions; a base URL whose
    /// path names another API than `api` is refused.
    pub fn parse_for(base_url: &str, api: Option<Api>) -> Result<Endpoint, ProviderError> {
        let uri: http::Uri = base_url
            .parse()
            .map_err(|e| ProviderError::InvalidUrl(format!("{base_url:?}: {e}")))?;
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                return Err(ProviderError::InvalidUrl(format!(
                    "{base_url:?}: the scheme must be http or https"
                )))
            }
        };
        let host = uri
            .host()
            .ok_or_else(|| ProviderError::InvalidUrl(format!("{base_url:?}: no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        let base = uri.path().trim_end_matches('/');
        let full = Api::of_path(base);
        let api = match (api, full) {
            (Some(a), Some(f)) if a != f => {
                return Err(ProviderError::InvalidUrl(format!(
                    "{base_url:?}: the path is the {f} API's, but --api is {a}; give the base \
                     URL without the API's path"
                )))
            }
            (Some(a), _) => a,
            (None, Some(f)) => f,
            (None, None) => Api::of_host(&host).unwrap_or(Api::Chat),
        };
        let path = match full {
            Some(_) => base.to_string(),
            None => format!("{base}{}", api.path()),
        };
        Ok(Endpoint {
            api,
            tls,
            host,
            port,
            path,
            query: uri.query().map(str::to_string),
        })
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The API the endpoint speaks.
    pub fn api(&self) -> Api {
        self.api
    }

    /// The API's URL, with the base URL's query.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        let query = self
            .query
            .as_ref()
            .map(|q| format!("?{q}"))
            .unwrap_or_default();
        format!("{scheme}://{}{}{query}", self.authority(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Base URLs as OpenAI clients write them.
    #[test]
    fn endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8080/v1").unwrap();
        assert_eq!(
            (e.tls, e.port, e.path.as_str()),
            (false, 8080, "/v1/chat/completions")
        );
        let e = Endpoint::parse("https://api.example.com/v1/").unwrap();
        assert_eq!(
            (e.tls, e.port, e.path.as_str()),
            (true, 443, "/v1/chat/completions")
        );
        let e = Endpoint::parse("http://[::1]:9000").unwrap();
        assert_eq!(
            (e.host.as_str(), e.authority()),
            ("::1", "[::1]:9000".to_string())
        );
        assert!(Endpoint::parse("ftp://x/v1").is_err());
    }

    /// A query in the base URL (Azure OpenAI's `api-version`) reaches every request whole.
    #[test]
    fn the_base_urls_query_is_kept() {
        let e = Endpoint::parse(
            "https://r.openai.azure.com/openai/deployments/d/?api-version=2024-10-21&x=a%2Fb",
        )
        .unwrap();
        assert_eq!(
            e.url(),
            "https://r.openai.azure.com:443/openai/deployments/d/chat/completions\
             ?api-version=2024-10-21&x=a%2Fb"
        );
        let e = Endpoint::parse("http://127.0.0.1:8080/v1").unwrap();
        assert_eq!(e.url(), "http://127.0.0.1:8080/v1/chat/completions");
    }

    /// `--api` picks the path; a base URL that names its API (by path, or Anthropic's host)
    /// needs no flag, and one that names another API than the flag is refused.
    #[test]
    fn the_api_picks_the_path() {
        let e = Endpoint::parse_for("http://127.0.0.1:1/v1", Some(Api::Responses)).unwrap();
        assert_eq!(e.url(), "http://127.0.0.1:1/v1/responses");
        let e = Endpoint::parse_for("http://127.0.0.1:1/v1?k=v", Some(Api::Messages)).unwrap();
        assert_eq!(
            (e.api(), e.url().as_str()),
            (Api::Messages, "http://127.0.0.1:1/v1/messages?k=v")
        );
        let e = Endpoint::parse("https://api.anthropic.com/v1").unwrap();
        assert_eq!((e.api(), e.path.as_str()), (Api::Messages, "/v1/messages"));
        let e = Endpoint::parse("https://api.openai.com/v1/responses/").unwrap();
        assert_eq!(
            (e.api(), e.path.as_str()),
            (Api::Responses, "/v1/responses")
        );
        let e = Endpoint::parse_for("https://api.openai.com/v1/responses", Some(Api::Responses));
        assert_eq!(e.unwrap().path, "/v1/responses");
        let e = Endpoint::parse_for("http://h/v1/chat/completions", Some(Api::Messages));
        assert!(matches!(e, Err(ProviderError::InvalidUrl(m)) if m.contains("chat API's")));
        assert_eq!(
            Endpoint::parse("https://api.openai.com/v1").unwrap().api(),
            Api::Chat
        );
    }
}
