//! Finding a JSON document inside a pod log.
//!
//! A benchmark command usually prints progress, then the tool's JSON (written to stdout, or
//! `cat` of a result file), then maybe a line or two more. The document starts on a line
//! whose first character is `{`: pretty-printers put nested objects on indented lines, so
//! only column-0 braces are candidates, and a truncated document does not make one of its
//! inner objects look like the result.

use serde_json::Value;

/// What a search for a document found.
#[derive(Debug)]
pub(crate) enum Found {
    /// A document accepted by the caller's test, and the 1-based line it starts on.
    Document { line: usize, value: Value },
    /// A document started but did not parse; the 1-based line of the fault and why.
    Broken { line: usize, message: String },
    /// No line starts a JSON object.
    Absent,
}

/// The first JSON object in `output` (starting at column 0) for which `accept` holds.
/// Text after the object is ignored.
pub(crate) fn find(output: &str, accept: impl Fn(&Value) -> bool) -> Found {
    let mut first_fault: Option<(usize, String)> = None;
    let last_line = output.lines().count().max(1);
    let mut offset = 0;
    for (index, line) in output.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        if !line.starts_with('{') {
            continue;
        }
        let line_no = index + 1;
        let mut stream = serde_json::Deserializer::from_str(&output[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(value)) if value.is_object() && accept(&value) => {
                return Found::Document {
                    line: line_no,
                    value,
                };
            }
            Some(Ok(_)) | None => {}
            Some(Err(e)) => {
                if first_fault.is_none() {
                    // serde counts the position after a final newline as one more line.
                    let fault_line = (line_no + e.line().saturating_sub(1)).min(last_line);
                    first_fault = Some((fault_line, json_fault(&e, &output[start..])));
                }
            }
        }
    }
    match first_fault {
        Some((line, message)) => Found::Broken { line, message },
        None => Found::Absent,
    }
}

/// A serde_json error without its own "at line … column …" suffix (the caller reports the
/// line of the log instead). A document that never closes is called truncated, whatever
/// serde tripped over at the cut (often a newline inside a string).
fn json_fault(e: &serde_json::Error, text: &str) -> String {
    let full = e.to_string();
    let message = match full.rfind(" at line ") {
        Some(cut) => &full[..cut],
        None => &full,
    };
    if e.is_eof() || !closes(text) {
        format!("the JSON document is truncated ({message})")
    } else {
        format!("invalid JSON: {message}")
    }
}

/// Whether the brackets opened at the start of `text` are all closed somewhere (strings and
/// escapes skipped).
fn closes(text: &str) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"' | '\n') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_document_after_progress_lines() {
        let log = "starting\n{\"a\": 1}\ndone\n";
        match find(log, |_| true) {
            Found::Document { line, value } => {
                assert_eq!(line, 2);
                assert_eq!(value["a"], 1);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn reports_where_a_truncated_document_ends() {
        let log = "x\n{\n  \"a\": {\n    \"b\": 1\n";
        match find(log, |_| true) {
            Found::Broken { line, message } => {
                assert_eq!(line, 4);
                assert!(message.contains("truncated"), "{message}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn skips_documents_the_caller_rejects() {
        let log = "{\"other\": 1}\n{\"results\": []}\n";
        assert!(matches!(
            find(log, |v| v.get("results").is_some()),
            Found::Document { line: 2, .. }
        ));
        assert!(matches!(find("no json here", |_| true), Found::Absent));
    }
}
