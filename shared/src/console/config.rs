//! What the console's page needs to know about the deployment, from the
//! environment: the OAuth 2.0 provider's domain and public client, when
//! the deployment has one (the Cognito user pool of `template.yaml`).
//! Served to the page as `console/config.json`; it holds no secret.

use serde::Serialize;

use crate::config::ConfigError;

/// `https://<prefix>.auth.<region>.amazoncognito.com` (an origin: scheme, host, no path).
pub const OAUTH_DOMAIN_VAR: &str = "WEBHOOKS_CONSOLE_OAUTH_DOMAIN";
/// The public app client's id (no secret: the code flow uses PKCE).
pub const OAUTH_CLIENT_ID_VAR: &str = "WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID";
/// Scopes asked for, space separated.
pub const OAUTH_SCOPES_VAR: &str = "WEBHOOKS_CONSOLE_OAUTH_SCOPES";
/// The scopes asked for when `WEBHOOKS_CONSOLE_OAUTH_SCOPES` is unset.
pub const DEFAULT_SCOPES: &str = "openid webhooks/read webhooks/write";

/// The deployment as the console's page sees it, served as `console/config.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConsoleConfig {
    /// The hosted sign-in of an OAuth 2.0 provider, or none (API key and
    /// access token typed or pasted in).
    pub oauth: Option<OAuthConfig>,
}

/// The OAuth 2.0 provider the console signs in with (authorization code flow with PKCE).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OAuthConfig {
    /// The provider's origin; its endpoints are Cognito's paths below it.
    pub domain: String,
    /// `authorizationUrl`: where the page sends the user to sign in.
    #[serde(rename = "authorizationUrl")]
    pub authorization_url: String,
    /// `tokenUrl`: where the page trades the code (and later the refresh token) for tokens.
    #[serde(rename = "tokenUrl")]
    pub token_url: String,
    /// `revokeUrl`: where the page revokes the refresh token on sign-out.
    #[serde(rename = "revokeUrl")]
    pub revoke_url: String,
    /// `clientId`: the public app client's id (`WEBHOOKS_CONSOLE_OAUTH_CLIENT_ID`).
    #[serde(rename = "clientId")]
    pub client_id: String,
    /// The scopes asked for, space separated (`WEBHOOKS_CONSOLE_OAUTH_SCOPES`).
    pub scopes: String,
}

impl ConsoleConfig {
    /// From the `WEBHOOKS_CONSOLE_OAUTH_*` variables of the process.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Both OAuth variables or neither; a bad value names its variable.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |var: &str| {
            lookup(var)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let (domain, client_id) = match (get(OAUTH_DOMAIN_VAR), get(OAUTH_CLIENT_ID_VAR)) {
            (None, None) => return Ok(ConsoleConfig { oauth: None }),
            (Some(d), Some(c)) => (d, c),
            (Some(_), None) => return Err(missing(OAUTH_CLIENT_ID_VAR, OAUTH_DOMAIN_VAR)),
            (None, Some(_)) => return Err(missing(OAUTH_DOMAIN_VAR, OAUTH_CLIENT_ID_VAR)),
        };
        let domain = origin(&domain).ok_or_else(|| ConfigError {
            var: OAUTH_DOMAIN_VAR,
            message: format!(
                "'{domain}' is not an https origin such as https://example.auth.us-east-1.amazoncognito.com"
            ),
        })?;
        if client_id.len() > 128 || !client_id.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(ConfigError {
                var: OAUTH_CLIENT_ID_VAR,
                message: "must be 1 to 128 letters and digits".into(),
            });
        }
        let scopes = get(OAUTH_SCOPES_VAR).unwrap_or_else(|| DEFAULT_SCOPES.to_owned());
        if !scopes
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ')
        {
            return Err(ConfigError {
                var: OAUTH_SCOPES_VAR,
                message: "must be scope names separated by spaces".into(),
            });
        }
        Ok(ConsoleConfig {
            oauth: Some(OAuthConfig {
                authorization_url: format!("{domain}/oauth2/authorize"),
                token_url: format!("{domain}/oauth2/token"),
                revoke_url: format!("{domain}/oauth2/revoke"),
                domain,
                client_id,
                scopes,
            }),
        })
    }
}

fn missing(var: &'static str, other: &str) -> ConfigError {
    ConfigError {
        var,
        message: format!("is required when {other} is set"),
    }
}

/// `https://host[:port]` of a URL with no path, query, fragment or user
/// info; http only for loopback (a development provider).
fn origin(value: &str) -> Option<String> {
    let url = url::Url::parse(value).ok()?;
    let loopback = matches!(url.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && loopback);
    if !scheme_ok
        || !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || !matches!(url.path(), "" | "/")
    {
        return None;
    }
    Some(url.origin().ascii_serialization())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> Result<ConsoleConfig, ConfigError> {
        ConsoleConfig::from_lookup(|k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn oauth_is_both_variables_or_neither() {
        assert_eq!(config(&[]).unwrap().oauth, None);
        let c = config(&[
            (
                OAUTH_DOMAIN_VAR,
                "https://x.auth.eu-west-1.amazoncognito.com/",
            ),
            (OAUTH_CLIENT_ID_VAR, "abc123"),
        ])
        .unwrap()
        .oauth
        .unwrap();
        assert_eq!(c.domain, "https://x.auth.eu-west-1.amazoncognito.com");
        assert_eq!(
            c.token_url,
            "https://x.auth.eu-west-1.amazoncognito.com/oauth2/token"
        );
        assert_eq!(c.scopes, DEFAULT_SCOPES);
        assert_eq!(
            config(&[(OAUTH_DOMAIN_VAR, "https://x.example")])
                .unwrap_err()
                .var,
            OAUTH_CLIENT_ID_VAR
        );
        assert_eq!(
            config(&[(OAUTH_CLIENT_ID_VAR, "abc")]).unwrap_err().var,
            OAUTH_DOMAIN_VAR
        );
    }

    #[test]
    fn the_domain_is_an_https_origin() {
        for bad in [
            "http://x.example",
            "https://x.example/path",
            "https://u:p@x.example",
            "https://x.example/?q=1",
            "x.example",
            "javascript:alert(1)",
        ] {
            let e = config(&[(OAUTH_DOMAIN_VAR, bad), (OAUTH_CLIENT_ID_VAR, "abc")]).unwrap_err();
            assert_eq!(e.var, OAUTH_DOMAIN_VAR, "{bad}");
        }
        let e = config(&[
            (OAUTH_DOMAIN_VAR, "https://x.example"),
            (OAUTH_CLIENT_ID_VAR, "a b'"),
        ])
        .unwrap_err();
        assert_eq!(e.var, OAUTH_CLIENT_ID_VAR);
        assert!(config(&[
            (OAUTH_DOMAIN_VAR, "http://127.0.0.1:9000"),
            (OAUTH_CLIENT_ID_VAR, "abc")
        ])
        .is_ok());
    }
}
