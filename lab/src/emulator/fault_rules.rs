//! How injected fault rules are used up, alike in both emulators: each emulator says
//! which calls a rule covers and what error it answers; this decides which rules a call
//! uses and counts them down.

use std::time::Duration;

/// A fault rule as [`take`] sees it.
pub(crate) trait CountedRule {
    /// What the rule answers instead of carrying out the call.
    type Error;

    /// The error it injects, if it injects one.
    fn error(&self) -> Option<Self::Error>;

    /// The delay it injects, if it injects one.
    fn latency_ms(&self) -> Option<u64>;

    /// Calls left; `None`: until cleared.
    fn remaining(&mut self) -> &mut Option<u32>;

    /// Matching calls still let through before the rule starts; `None`: it starts at once.
    fn after(&mut self) -> &mut Option<u32>;
}

/// Applies `rules` to one call (the rules for which `covers` holds): a rule still letting
/// calls through counts that down instead; of the others, the first with an error answers,
/// the longest delay applies, and every rule used counts down; rules used up are removed.
pub(crate) fn take<R: CountedRule>(
    rules: &mut Vec<R>,
    covers: impl Fn(&R) -> bool,
) -> (Option<R::Error>, Duration) {
    let mut error = None;
    let mut delay = Duration::ZERO;
    for rule in rules.iter_mut() {
        if *rule.remaining() == Some(0) || !covers(rule) {
            continue;
        }
        if let Some(n @ 1..) = *rule.after() {
            *rule.after() = Some(n - 1);
            continue;
        }
        let mut used = false;
        if error.is_none()
            && let Some(e) = rule.error()
        {
            error = Some(e);
            used = true;
        }
        if let Some(ms) = rule.latency_ms() {
            delay = delay.max(Duration::from_millis(ms));
            used = true;
        }
        if used && let Some(n) = rule.remaining() {
            *n = n.saturating_sub(1);
        }
    }
    rules.retain_mut(|r| *r.remaining() != Some(0));
    (error, delay)
}
