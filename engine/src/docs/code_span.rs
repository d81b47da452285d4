//! The `` `…` `` code spans of a line of markdown, which the docs' checks read claims from.

/// One code span.
pub(super) struct CodeSpan<'a> {
    /// What is between the backticks.
    pub text: &'a str,
    /// The span with its backticks.
    pub outer: &'a str,
    /// Where it ends in the line, after the closing backtick.
    pub end: usize,
}

/// The code spans of `line`, in order; an unclosed backtick opens none.
pub(super) fn code_spans(line: &str) -> Vec<CodeSpan<'_>> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(open) = line[from..].find('`').map(|o| from + o) {
        let Some(len) = line[open + 1..].find('`') else {
            break;
        };
        let close = open + 1 + len;
        spans.push(CodeSpan {
            text: &line[open + 1..close],
            outer: &line[open..=close],
            end: close + 1,
        });
        from = close + 1;
    }
    spans
}
