//! What one Terraform command did, and the check every command's output goes through.

use std::fmt;

use serde_json::Value;

use crate::CONSISTENCY_ERRORS;

/// What one Terraform command did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// The command line, for messages (`terraform plan -input=false …`).
    pub command: String,
    /// The exit code; `-1` if the process was ended by a signal.
    pub status_code: i32,
    /// Everything the command wrote to stdout.
    pub stdout: String,
    /// Everything the command wrote to stderr.
    pub stderr: String,
}

impl Output {
    /// Whether the command exited with code 0.
    pub fn success(&self) -> bool {
        self.status_code == 0
    }

    /// Stdout followed by stderr, for searching the command's messages wherever they went.
    pub fn combined(&self) -> String {
        let mut all = String::with_capacity(self.stdout.len() + self.stderr.len() + 1);
        all.push_str(&self.stdout);
        if !all.is_empty() && !all.ends_with('\n') && !self.stderr.is_empty() {
            all.push('\n');
        }
        all.push_str(&self.stderr);
        all
    }

    /// Whether stdout or stderr contains `needle`, ignoring differences in whitespace (human
    /// output is wrapped at 78 columns, so a message may be split across lines).
    pub fn contains(&self, needle: &str) -> bool {
        squash_whitespace(&self.combined()).contains(&squash_whitespace(needle))
    }

    /// Stdout parsed as JSON.
    ///
    /// # Panics
    ///
    /// If stdout is not one JSON document; the message shows the whole output.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|err| {
            panic!("stdout of `{}` is not JSON ({err}):\n{self}", self.command)
        })
    }
}

impl fmt::Display for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Stderr first: Terraform's errors go there, and a long plan on stdout would push
        // them out of a log that keeps only the start of a failure.
        writeln!(f, "$ {}  (exit code {})", self.command, self.status_code)?;
        writeln!(f, "----- stderr -----")?;
        writeln!(f, "{}", self.stderr.trim_end())?;
        writeln!(f, "----- stdout -----")?;
        writeln!(f, "{}", self.stdout.trim_end())?;
        write!(f, "------------------")
    }
}

fn squash_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Fails if Terraform reported that the provider broke a consistency rule (one of
/// [`CONSISTENCY_ERRORS`], as an error or a warning, in human or JSON output).
///
/// # Panics
///
/// On any such message, showing the whole output.
pub fn assert_no_consistency_errors(output: &Output) {
    let text = squash_whitespace(&output.combined());
    if let Some(found) = CONSISTENCY_ERRORS.iter().find(|msg| text.contains(*msg)) {
        panic!(
            "Terraform reported \"{found}\": the provider broke Terraform's consistency rules\n{output}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &str, stderr: &str) -> Output {
        Output {
            command: "terraform test".to_owned(),
            status_code: 1,
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
        }
    }

    #[test]
    fn combined_joins_stdout_and_stderr() {
        assert_eq!(output("a", "b").combined(), "a\nb");
        assert_eq!(output("a\n", "b").combined(), "a\nb");
        assert_eq!(output("", "b").combined(), "b");
        assert_eq!(output("a", "").combined(), "a");
    }

    #[test]
    fn contains_ignores_line_wrapping() {
        let out = output("", "Error: Provider produced\ninconsistent   result");
        assert!(out.contains("Provider produced inconsistent result"));
        assert!(!out.contains("invalid plan"));
    }

    #[test]
    fn consistency_errors_are_detected_even_when_wrapped() {
        for msg in CONSISTENCY_ERRORS {
            let wrapped = msg.replacen(' ', "\n", 1);
            let out = output("", &format!("Error: {wrapped}\n\ndetails"));
            let caught = std::panic::catch_unwind(|| assert_no_consistency_errors(&out));
            assert!(caught.is_err(), "{msg:?} was not detected");
        }
        assert_no_consistency_errors(&output("Apply complete!", "Warning: something else"));
    }
}
