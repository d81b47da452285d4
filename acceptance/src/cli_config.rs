//! The CLI configuration files the harness writes: `dev_overrides` for a work directory, or
//! a filesystem mirror for installing a release.

use std::path::Path;

use crate::PROVIDER_SOURCE;

/// A CLI configuration that installs `gpufleet/gpufleet` from the filesystem mirror at
/// `mirror` (as `scripts/release --mirror` lays it out) and everything else directly.
pub fn mirror_cli_config(mirror: &Path) -> String {
    format!(
        "provider_installation {{\n  filesystem_mirror {{\n    path    = \"{}\"\n    \
         include = [\"{PROVIDER_SOURCE}\"]\n  }}\n  direct {{\n    \
         exclude = [\"{PROVIDER_SOURCE}\"]\n  }}\n}}\n",
        hcl_escape(&mirror.to_string_lossy())
    )
}

pub(crate) fn cli_config_text(provider_dir: Option<&Path>) -> String {
    match provider_dir {
        Some(dir) => format!(
            "# Written by the gpufleet acceptance harness.\n\
             provider_installation {{\n  \
               dev_overrides {{\n    \
                 \"{PROVIDER_SOURCE}\" = \"{}\"\n  \
               }}\n  \
               direct {{}}\n\
             }}\n",
            hcl_escape(&dir.to_string_lossy())
        ),
        None => "# Written by the gpufleet acceptance harness: no provider overrides.\n".to_owned(),
    }
}

/// Escapes `text` for use inside an HCL quoted string.
fn hcl_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace("${", "$${")
        .replace("%{", "%%{")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_config_overrides_the_provider() {
        let text = cli_config_text(Some(Path::new("/x/target/debug")));
        assert!(
            text.contains("\"gpufleet/gpufleet\" = \"/x/target/debug\""),
            "{text}"
        );
        assert!(text.contains("direct {}"), "{text}");
        assert!(!cli_config_text(None).contains("dev_overrides"));
    }

    #[test]
    fn hcl_escape_escapes_quotes_backslashes_and_templates() {
        assert_eq!(hcl_escape(r#"a\b"c${d}%{e}"#), r#"a\\b\"c$${d}%%{e}"#);
    }
}
