//! Which root user step of a harness history echoed which client message, when the steps were
//! renumbered.
//!
//! The record remembers each message by the index of the step that echoed it live. The history
//! a resumed conversation returns numbers its steps again, and the two differ when the harness
//! could not save some steps: a turn during which its volume was full keeps its user step but
//! may lose its answer, and every later step then comes back one or more places earlier. Read
//! by index alone, each later message would lose its id (or take a neighbour's). So each
//! recorded message is checked against the step at its index, by the digest of the text the
//! harness echoed for it ([`echo_digest`], kept in the record's `echoed`), and one that does
//! not fit is found again further on: steps are only ever lost, never added, so a message's
//! step is at or before its recorded index and after the previous message's.

use std::collections::{HashMap, HashSet};

use crate::store::{Digests, LostTurns, UserSteps};

/// The digest of the text a root user step echoed, as the record keeps it; none for a blank
/// text (nothing to tell steps apart by).
pub(crate) fn echo_digest(text: &str) -> Option<String> {
    let text = text.trim();
    (!text.is_empty()).then(|| crate::hash::sha256_hex(text.as_bytes(), 8))
}

/// Keeps in `echoed` the digest of `text`, echoed by the step of the message `message_id`.
pub(crate) fn record_echo(echoed: &mut Digests, message_id: &str, text: &str) {
    if let Some(digest) = echo_digest(text) {
        echoed.record(message_id.to_owned(), digest);
    }
}

/// A root user step of the history: its index and the digest of its text (none when empty).
pub(crate) struct UserStep {
    pub(crate) index: u32,
    pub(crate) digest: Option<String>,
}

/// Moves each message of `user_steps` to the step of `history` (the root user steps, in order)
/// that echoed it, and its lost turn with it; a message whose step is no longer in the history
/// is forgotten (were its step still there, unrecognised, it would show under a derived id, as
/// any message the record does not know). Returns how
/// many messages moved or were forgotten (0 when the history matches the record).
pub(crate) fn realign(
    user_steps: &mut UserSteps,
    lost_turns: &mut LostTurns,
    echoed: &Digests,
    history: &[UserStep],
) -> usize {
    let mut recorded: Vec<(u32, &str)> = user_steps.iter().collect();
    recorded.sort_unstable_by_key(|(step, _)| *step);
    let others: HashSet<&str> = recorded
        .iter()
        .filter_map(|(_, id)| echoed.get(id))
        .collect();
    let mut moves: HashMap<u32, Option<u32>> = HashMap::new();
    let mut next = 0;
    for &(step, message_id) in &recorded {
        let found = place(history, next, step, echoed.get(message_id), &others);
        if let Some(at) = found {
            next = at + 1;
        }
        let to = found.map(|at| history[at].index);
        if to != Some(step) {
            moves.insert(step, to);
        }
    }
    if moves.is_empty() {
        return 0;
    }
    let moved = moves.len();
    user_steps.renumber(|step| moves.get(&step).copied().unwrap_or(Some(step)));
    let is_user_step = |step: u32| history.iter().any(|u| u.index == step);
    lost_turns.renumber(|step| match moves.get(&step) {
        Some(to) => *to,
        None => is_user_step(step).then_some(step),
    });
    moved
}

/// The position in `history`, from `from` on, of the step that echoed a message recorded at
/// `step` whose echo had `digest`; `others`: the digests of every recorded message.
fn place(
    history: &[UserStep],
    from: usize,
    step: u32,
    digest: Option<&str>,
    others: &HashSet<&str>,
) -> Option<usize> {
    let rest = history.get(from..).unwrap_or_default();
    let by_index = rest
        .iter()
        .position(|u| u.index == step)
        .map(|pos| from + pos);
    let Some(digest) = digest else {
        // No digest (a record of an earlier version): the index, or else the next user step
        // if it is before it (what was lost moved it earlier).
        return by_index.or_else(|| rest.first().filter(|u| u.index < step).map(|_| from));
    };
    let digest_at = |pos: usize| history[pos].digest.as_deref();
    if by_index.is_some_and(|pos| digest_at(pos) == Some(digest)) {
        return by_index;
    }
    let by_text = rest
        .iter()
        .position(|u| u.index <= step && u.digest.as_deref() == Some(digest))
        .map(|pos| from + pos);
    // A text found nowhere: the step at the index, unless it holds another message's text
    // (this message's step was lost, and a later one moved onto its index).
    by_text.or(by_index.filter(|&pos| digest_at(pos).is_none_or(|d| !others.contains(d))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(steps: &[(u32, &str)]) -> Vec<UserStep> {
        steps
            .iter()
            .map(|(index, text)| UserStep {
                index: *index,
                digest: echo_digest(text),
            })
            .collect()
    }

    fn recorded(steps: &[(u32, &str, &str)]) -> (UserSteps, Digests) {
        let (mut user_steps, mut echoed) = (UserSteps::default(), Digests::default());
        for (step, id, text) in steps {
            user_steps.insert(*step, (*id).to_owned());
            record_echo(&mut echoed, id, text);
        }
        (user_steps, echoed)
    }

    fn pairs(user_steps: &UserSteps) -> Vec<(u32, String)> {
        let mut pairs: Vec<_> = user_steps
            .iter()
            .map(|(s, id)| (s, id.to_owned()))
            .collect();
        pairs.sort();
        pairs
    }

    /// `(recorded, history, expected)`: the record's (step, id, echoed text) against the
    /// history's (step, text), and the (step, id) the record holds after.
    type Case<'a> = (
        &'a str,
        &'a [(u32, &'a str, &'a str)],
        &'a [(u32, &'a str)],
        &'a [(u32, &'a str)],
    );

    #[test]
    fn each_message_keeps_or_finds_its_step() {
        let cases: &[Case] = &[
            (
                "a history as recorded changes nothing",
                &[(0, "m1", "one"), (2, "m2", "two"), (4, "m3", "three")],
                &[(0, "one"), (2, "two"), (4, "three")],
                &[(0, "m1"), (2, "m2"), (4, "m3")],
            ),
            (
                "an answer the harness could not save moves every later message one step earlier",
                &[
                    (0, "m1", "one"),
                    (2, "m2", "two"),
                    (4, "m3", "three"),
                    (6, "m4", "four"),
                ],
                &[(0, "one"), (2, "two"), (3, "three"), (5, "four")],
                &[(0, "m1"), (2, "m2"), (3, "m3"), (5, "m4")],
            ),
            (
                "a shift onto another message's step is told by the text",
                &[
                    (0, "m1", "one"),
                    (2, "m2", "two"),
                    (5, "m3", "three"),
                    (7, "m4", "four"),
                ],
                &[(0, "one"), (2, "two"), (3, "three"), (5, "four")],
                &[(0, "m1"), (2, "m2"), (3, "m3"), (5, "m4")],
            ),
            (
                "a message whose user step was lost is forgotten, the next keeps its id",
                &[(0, "m1", "one"), (2, "m2", "two"), (4, "m3", "three")],
                &[(0, "one"), (2, "three")],
                &[(0, "m1"), (2, "m3")],
            ),
            (
                "the same text twice goes to the messages in order",
                &[(0, "m1", "again"), (3, "m2", "again"), (5, "m3", "again")],
                &[(0, "again"), (2, "again"), (4, "again")],
                &[(0, "m1"), (2, "m2"), (4, "m3")],
            ),
            (
                "without digests (an earlier record) the order places what moved",
                &[(0, "m1", ""), (2, "m2", ""), (4, "m3", "")],
                &[(0, "one"), (2, "two"), (3, "three")],
                &[(0, "m1"), (2, "m2"), (3, "m3")],
            ),
            (
                "a text found nowhere keeps its index when it is a user step",
                &[(0, "m1", "one"), (2, "m2", "two")],
                &[(0, "one"), (2, "two, as the harness rewrote it")],
                &[(0, "m1"), (2, "m2")],
            ),
        ];
        for (name, record, steps, expected) in cases {
            let (mut user_steps, echoed) = recorded(record);
            let mut lost = LostTurns::default();
            realign(&mut user_steps, &mut lost, &echoed, &history(steps));
            let expected: Vec<(u32, String)> = expected
                .iter()
                .map(|(s, id)| (*s, (*id).to_owned()))
                .collect();
            assert_eq!(pairs(&user_steps), expected, "{name}");
        }
    }

    #[test]
    fn a_lost_turn_moves_with_its_message() {
        let (mut user_steps, echoed) =
            recorded(&[(0, "m1", "one"), (2, "m2", "two"), (4, "m3", "three")]);
        let mut lost = LostTurns::default();
        lost.insert(4);
        lost.insert(2);
        let moved = realign(
            &mut user_steps,
            &mut lost,
            &echoed,
            &history(&[(0, "one"), (2, "two"), (3, "three")]),
        );
        assert_eq!(moved, 1);
        assert!(lost.contains(3) && lost.contains(2) && !lost.contains(4));
    }
}
