use std::collections::HashSet;

use proptest::prelude::*;

use super::model::title_from;
use super::*;

fn summary(id: &str, updated: u64, archived: bool) -> ThreadSummary {
    ThreadSummary {
        id: id.into(),
        title: String::new(),
        created_at: at(updated),
        updated_at: at(updated),
        state: ThreadState::Idle,
        archived,
        message_count: 0,
        workspace_bytes: 0,
        branch: String::new(),
        branches: Vec::new(),
    }
}

#[test]
fn a_title_is_the_first_line_of_the_first_message_cut_to_80_characters() {
    assert_eq!(
        title_from("What is the weather in Paris?"),
        "What is the weather in Paris?"
    );
    assert_eq!(
        title_from("\n  \n  list the files  \nthen more"),
        "list the files"
    );
    let long = "é".repeat(100);
    assert_eq!(title_from(&long).chars().count(), TITLE_FROM_MESSAGE_CHARS);
    assert_eq!(title_from(""), "");
}

#[test]
fn a_patch_is_refused_when_empty_or_its_title_is_blank_too_long_or_holds_controls() {
    assert_eq!(
        check_patch(ThreadPatch::default()),
        Err(ThreadsError::EmptyPatch)
    );
    for bad in ["", "   ", "a\u{7}b", "line\nbreak"] {
        let patch = ThreadPatch {
            title: Some(bad.into()),
            archived: None,
            ..ThreadPatch::default()
        };
        assert!(
            matches!(check_patch(patch), Err(ThreadsError::BadTitle(_))),
            "{bad:?}"
        );
    }
    let long = ThreadPatch {
        title: Some("x".repeat(MAX_TITLE_CHARS + 1)),
        archived: None,
        ..ThreadPatch::default()
    };
    assert!(matches!(check_patch(long), Err(ThreadsError::BadTitle(_))));
    let ok = check_patch(ThreadPatch {
        title: Some("  Paris weather  ".into()),
        archived: Some(true),
        ..ThreadPatch::default()
    })
    .unwrap();
    assert_eq!(ok.title.as_deref(), Some("Paris weather"));
    assert_eq!(ok.archived, Some(true));
}

#[test]
fn bad_limits_and_cursors_are_refused() {
    let none = Vec::new();
    for limit in [0, MAX_PAGE + 1] {
        let query = ThreadQuery {
            limit,
            ..ThreadQuery::default()
        };
        assert_eq!(page(none.clone(), &query), Err(ThreadsError::BadLimit));
    }
    for cursor in ["", "x", "12", "12.zz", "abc.00"] {
        let query = ThreadQuery {
            cursor: Some(cursor.into()),
            ..ThreadQuery::default()
        };
        assert_eq!(
            page(none.clone(), &query),
            Err(ThreadsError::BadCursor),
            "{cursor}"
        );
    }
}

#[test]
fn pages_run_newest_first_and_the_archived_filter_picks_which() {
    let threads = vec![
        summary("old", 10, false),
        summary("new", 30, false),
        summary("mid", 20, true),
        summary("tie-b", 25, false),
        summary("tie-a", 25, false),
    ];
    let ids = |archived| {
        page(
            threads.clone(),
            &ThreadQuery {
                archived,
                ..ThreadQuery::default()
            },
        )
        .unwrap()
        .threads
        .into_iter()
        .map(|t| t.id)
        .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(ArchivedFilter::Exclude),
        ["new", "tie-a", "tie-b", "old"]
    );
    assert_eq!(ids(ArchivedFilter::Only), ["mid"]);
    assert_eq!(ids(ArchivedFilter::Include).len(), 5);
}

proptest! {
    /// Page by page, every thread comes exactly once, in order, whatever the page size and the
    /// times (many shared).
    #[test]
    fn every_thread_is_listed_once_page_by_page(
        times in proptest::collection::vec(0u64..50, 0..300),
        limit in 1usize..40,
    ) {
        let threads: Vec<ThreadSummary> = times
            .iter()
            .enumerate()
            .map(|(i, t)| summary(&format!("t{i}"), *t, false))
            .collect();
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let got = page(threads.clone(), &ThreadQuery { limit, cursor, archived: ArchivedFilter::Exclude }).unwrap();
            prop_assert!(got.threads.len() <= limit);
            seen.extend(got.threads.iter().map(|t| (unix(t.updated_at), t.id.clone())));
            match got.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        prop_assert_eq!(seen.len(), threads.len());
        let distinct: HashSet<_> = seen.iter().map(|(_, id)| id.clone()).collect();
        prop_assert_eq!(distinct.len(), threads.len());
        let mut sorted = seen.clone();
        sorted.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        prop_assert_eq!(seen, sorted);
    }
}
