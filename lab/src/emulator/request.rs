//! One HTTP request as the transport read it; each emulator takes what its API uses.

use serde_json::Value;

/// A request to an emulator.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, … (upper case).
    pub method: String,
    /// The path, percent-encoded as sent (`/api/v2/vnet/3`).
    pub path: String,
    /// The query string without `?` (`filterByVpc=1,2`), empty when none.
    pub query: String,
    /// The `Cookie` headers, joined with `; `, if any.
    pub cookie: Option<String>,
    /// The common name of the verified client certificate, if one was presented.
    pub client_cn: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

impl Request {
    /// A request for `target` (a path with an optional `?query`), with no body and no
    /// certificate.
    #[must_use]
    pub fn new(method: &str, target: &str) -> Self {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Self {
            method: method.to_ascii_uppercase(),
            path: path.to_owned(),
            query: query.to_owned(),
            ..Self::default()
        }
    }

    /// With a JSON body.
    #[must_use]
    pub fn json(mut self, body: &Value) -> Self {
        self.body = body.to_string().into_bytes();
        self
    }

    /// With a raw body.
    #[must_use]
    pub fn raw(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// With a `Cookie` header.
    #[must_use]
    pub fn cookie(mut self, cookie: impl Into<String>) -> Self {
        self.cookie = Some(cookie.into());
        self
    }

    /// As the client whose verified certificate names `cn` (`None`: no certificate).
    #[must_use]
    pub fn client_cn(mut self, cn: Option<&str>) -> Self {
        self.client_cn = cn.map(str::to_owned);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_splits_into_path_and_query() {
        let r = Request::new("get", "/api/v2/vnet?filterByVpc=1,2");
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/v2/vnet");
        assert_eq!(r.query, "filterByVpc=1,2");
        assert_eq!(Request::new("POST", "/json").query, "");
    }
}
