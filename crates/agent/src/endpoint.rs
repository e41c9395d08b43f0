//! Where the chat-completions endpoint is: a base URL as OpenAI clients take it.

use super::provider_error::ProviderError;

/// Where the chat-completions endpoint is.
#[derive(Debug, Clone)]
pub struct Endpoint {
    tls: bool,
    host: String,
    port: u16,
    /// The request path, e.g. `/v1/chat/completions`.
    path: String,
    /// The base URL's query, kept whole (Azure OpenAI's `api-version=…`).
    query: Option<String>,
}

impl Endpoint {
    /// `base_url` as OpenAI clients take it (`https://api.example.com/v1`,
    /// `http://127.0.0.1:8080/v1`); `/chat/completions` is appended to its path, and its query
    /// (`?api-version=…`) is kept.
    pub fn parse(base_url: &str) -> Result<Endpoint, ProviderError> {
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
        Ok(Endpoint {
            tls,
            host,
            port,
            path: format!("{base}/chat/completions"),
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

    /// The chat-completions URL, with the base URL's query.
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
}
