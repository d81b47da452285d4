//! go-plugin's handshake: the magic cookie, protocol negotiation and the line on stdout.

use base64::Engine;

/// The cookie Terraform sets so that a provider knows it was launched by Terraform.
pub const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
/// Its expected value.
pub const MAGIC_COOKIE_VALUE: &str =
    "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";
/// go-plugin's core protocol version.
pub const CORE_PROTOCOL_VERSION: u32 = 1;
/// The plugin protocol this provider speaks.
pub const APP_PROTOCOL_VERSION: u32 = 6;

/// Why the provider refuses to start as a plugin.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HandshakeError {
    /// Started by hand rather than by Terraform.
    #[error(
        "this is a Terraform provider plugin: Terraform starts it when a configuration uses \
         the gpufleet/gpufleet provider. Run `terraform init` and `terraform plan` instead, or \
         start it with --debug to attach Terraform to it yourself"
    )]
    NotLaunchedByTerraform,
    /// Terraform offered only protocol versions we do not speak.
    #[error(
        "failed to negotiate a plugin protocol: Terraform offers versions {offered}, this \
         provider speaks version 6 (Terraform 1.0 or newer)"
    )]
    NoCommonProtocol {
        /// What Terraform offered.
        offered: String,
    },
}

/// Checks the cookie and picks protocol 6 from `PLUGIN_PROTOCOL_VERSIONS`.
pub fn negotiate(env: &dyn Fn(&str) -> Option<String>) -> Result<u32, HandshakeError> {
    if env(MAGIC_COOKIE_KEY).as_deref() != Some(MAGIC_COOKIE_VALUE) {
        return Err(HandshakeError::NotLaunchedByTerraform);
    }
    // Without the variable, go-plugin uses the server's own version.
    let Some(offered) = env("PLUGIN_PROTOCOL_VERSIONS") else {
        return Ok(APP_PROTOCOL_VERSION);
    };
    let speaks_ours = offered
        .split(',')
        .any(|v| v.trim().parse::<u32>() == Ok(APP_PROTOCOL_VERSION));
    if speaks_ours {
        Ok(APP_PROTOCOL_VERSION)
    } else {
        Err(HandshakeError::NoCommonProtocol { offered })
    }
}

/// The handshake line: `1|6|unix|/path|grpc|<server cert, base64 without padding>`.
pub fn line(network: &str, address: &str, server_cert_der: Option<&[u8]>) -> String {
    let cert = server_cert_der
        .map(|der| base64::engine::general_purpose::STANDARD_NO_PAD.encode(der))
        .unwrap_or_default();
    format!("{CORE_PROTOCOL_VERSION}|{APP_PROTOCOL_VERSION}|{network}|{address}|grpc|{cert}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn needs_the_cookie() {
        assert_eq!(
            negotiate(&env(&[])),
            Err(HandshakeError::NotLaunchedByTerraform)
        );
        assert_eq!(
            negotiate(&env(&[(MAGIC_COOKIE_KEY, "wrong")])),
            Err(HandshakeError::NotLaunchedByTerraform)
        );
    }

    #[test]
    fn picks_six_in_any_order() {
        for offered in ["5,6", "6,5", "6", " 5 , 6 "] {
            let vars: &'static [(&str, &str)] = Box::leak(Box::new([
                (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
                ("PLUGIN_PROTOCOL_VERSIONS", offered),
            ]));
            assert_eq!(negotiate(&env(vars)), Ok(6), "{offered}");
        }
    }

    #[test]
    fn refuses_without_six() {
        let r = negotiate(&env(&[
            (MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE),
            ("PLUGIN_PROTOCOL_VERSIONS", "4,5"),
        ]));
        assert!(matches!(r, Err(HandshakeError::NoCommonProtocol { .. })));
    }

    #[test]
    fn line_has_unpadded_cert() {
        let l = line("unix", "/tmp/p/s.sock", Some(&[1, 2, 3, 4]));
        assert_eq!(l, "1|6|unix|/tmp/p/s.sock|grpc|AQIDBA");
    }
}
