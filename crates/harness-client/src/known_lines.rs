//! Harness stderr lines known to be harmless: logged at debug level and counted by name instead
//! of being logged as warnings, so an operator's log keeps what needs a look.

use std::sync::atomic::{AtomicU64, Ordering};

/// A kind of harmless line: its name (a metric label) and the fragments that identify it.
struct KnownLine {
    name: &'static str,
    fragments: &'static [&'static str],
}

/// The known lines. When a conversation whose last turn was interrupted (its host died
/// mid-reply) is resumed, the harness reports the step that was still generating as one it
/// failed to convert, once per read of the trajectory; the turn is already reported
/// interrupted to the client, and the step's text up to then is kept.
const KNOWN: &[KnownLine] = &[KnownLine {
    name: "resumed_generating_step",
    fragments: &["failed to convert step", "CORTEX_STEP_STATUS_GENERATING"],
}];

/// How often each known line was seen, in `KNOWN`'s order, by every harness of this process.
static SEEN: [AtomicU64; 1] = [AtomicU64::new(0)];

/// The name of the known harmless line `line` is, counting it, or `None`.
pub(crate) fn recognise(line: &str) -> Option<&'static str> {
    let index = KNOWN
        .iter()
        .position(|k| k.fragments.iter().all(|f| line.contains(f)))?;
    SEEN[index].fetch_add(1, Ordering::Relaxed);
    Some(KNOWN[index].name)
}

/// Each known harmless harness line (by name) and how often harnesses of this process logged
/// it, for metrics.
pub fn known_harmless_lines() -> Vec<(&'static str, u64)> {
    KNOWN
        .iter()
        .zip(SEEN.iter())
        .map(|(k, n)| (k.name, n.load(Ordering::Relaxed)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resumed_generating_step_is_recognised_and_counted_and_other_lines_are_not() {
        let before = known_harmless_lines()[0].1;
        let line = "ERROR: logging before google.Init: E1203 10:01:02.123456      41 trajectory.go:88] \
                    failed to convert step 7: unexpected status CORTEX_STEP_STATUS_GENERATING";
        assert_eq!(recognise(line), Some("resumed_generating_step"));
        assert_eq!(
            recognise("E1203 10:01:02.1 1 x.go:1] failed to convert step 7: bad"),
            None
        );
        assert_eq!(recognise("CORTEX_STEP_STATUS_GENERATING"), None);
        assert!(known_harmless_lines()[0].1 > before);
    }
}
