//! Label selectors in the string form the API takes (`app=vcluster,release=a`), parsed for
//! matching on this side, so a list the provider already holds can answer a narrower one.
//! Only the equality-based forms are parsed (`k=v`, `k==v`, `k!=v`, `k`, `!k`); a set-based
//! one (`k in (a,b)`) parses to `None`, and the caller asks the API server instead.

use std::collections::BTreeMap;

use kube::core::{Expression, SelectorExt};

/// A parsed equality-based label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terms(Vec<Expression>);

impl Terms {
    /// Parses `selector`; `None` for a form this side does not match.
    pub fn parse(selector: &str) -> Option<Terms> {
        let mut terms = Vec::new();
        for term in selector.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if term.contains(['(', ')', ' ']) {
                return None;
            }
            let expression = if let Some((k, v)) = term.split_once("!=") {
                Expression::NotEqual(key(k)?, v.to_owned())
            } else if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Expression::Equal(key(k)?, v.to_owned())
            } else if let Some(k) = term.strip_prefix('!') {
                Expression::DoesNotExist(key(k)?)
            } else {
                Expression::Exists(key(term)?)
            };
            terms.push(expression);
        }
        Some(Terms(terms))
    }

    /// Whether every object this selector matches is also matched by `wider`: each of
    /// `wider`'s terms is one of these.
    pub fn within(&self, wider: &Terms) -> bool {
        wider.0.iter().all(|t| self.0.contains(t))
    }

    /// Whether `labels` match: every term does.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|term| term.matches(labels))
    }

    /// The single `key=value` term, when that is all the selector says.
    pub fn single_equality(&self) -> Option<(&str, &str)> {
        match self.0.as_slice() {
            [Expression::Equal(k, v)] => Some((k, v)),
            _ => None,
        }
    }
}

/// A label key as a term names it: not empty, no operator characters left in it.
fn key(k: &str) -> Option<String> {
    let k = k.trim();
    (!k.is_empty() && !k.contains(['=', '!'])).then(|| k.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn equality_forms_match_as_the_api_server_matches_them() {
        let l = labels(&[("app", "vcluster"), ("release", "a")]);
        for (selector, expected) in [
            ("app=vcluster,release=a", true),
            ("app==vcluster", true),
            ("app=vcluster,release=b", false),
            ("release!=b", true),
            ("release", true),
            ("!release", false),
            ("!tier", true),
            ("", true),
        ] {
            let terms = Terms::parse(selector).expect(selector);
            assert_eq!(terms.matches(&l), expected, "{selector}");
        }
    }

    #[test]
    fn set_based_and_broken_forms_are_left_to_the_api_server() {
        for selector in ["tier in (a,b)", "tier notin (a)", "=a", "!"] {
            let parsed = Terms::parse(selector);
            assert!(parsed.is_none(), "{selector}: {parsed:?}");
        }
        // `a!=` is the API server's "not equal to the empty value": kept.
        assert_eq!(
            Terms::parse("a!="),
            Some(Terms(vec![Expression::NotEqual("a".into(), String::new())]))
        );
    }

    #[test]
    fn a_selector_with_more_terms_lies_within_one_with_fewer() {
        let wide = Terms::parse("app=vcluster").expect("wide");
        assert!(
            Terms::parse("app=vcluster,release=a")
                .expect("narrow")
                .within(&wide)
        );
        assert!(!Terms::parse("release=a").expect("other").within(&wide));
        assert!(
            Terms::parse("app=vcluster")
                .expect("same")
                .within(&Terms::parse("").expect("all"))
        );
    }
}
