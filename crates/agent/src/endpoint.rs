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
}

impl Endpoint {
    /// `base_url` as OpenAI clients take it (`https://api.example.com/v1`,
    /// `http://127.0.0.1:8080/v1`); `/chat/completions` is appended.
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
        })
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The chat-completions URL.
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
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
}
