//! The model every workload talks to: `gemini-script` with a script that behaves like the
//! reference's `fast_mock.py` (pure).
//!
//! - a request reporting a tool result (`functionResponse` last) → the standard text reply;
//! - the last user text holds `BENCH_CALL_TOOL:<name>` → one `functionCall` to `<name>` with
//!   `{"choice": "yes", "toolSummary": …, "toolAction": …}`;
//! - anything else → the standard text reply: `tokens` words (~1 token each) in `chunks` SSE
//!   events, `finishReason: STOP` and usage on the last one, no delay.
//!
//! Every entry repeats forever and looks only at the request, so any number of conversations
//! share one model process.

use gemini_script::{Call, Matcher, Reply, Script};
use serde_json::json;

const WORDS: [&str; 26] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu",
];

/// The standard reply: `tokens` words and a final period (`fast_mock.make_text`).
pub(crate) fn reply_text(tokens: usize) -> String {
    let words: Vec<&str> = (0..tokens).map(|i| WORDS[i % WORDS.len()]).collect();
    format!("{}.", words.join(" "))
}

/// `text` split into `n` pieces of whole words, each but the last keeping its trailing space
/// (`fast_mock.split_text`).
pub(crate) fn split_text(text: &str, n: usize) -> Vec<String> {
    let words: Vec<&str> = text.split(' ').collect();
    let n = n.clamp(1, words.len());
    let (per, extra) = (words.len() / n, words.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    for k in 0..n {
        let take = per + usize::from(k < extra);
        let mut piece = words[i..i + take].join(" ");
        i += take;
        if i < words.len() {
            piece.push(' ');
        }
        out.push(piece);
    }
    out
}

/// The script for a reply of `tokens` words in `chunks` events; `tools` are the names
/// `BENCH_CALL_TOOL:<name>` may ask for.
pub(crate) fn script(tokens: usize, chunks: usize, tools: &[&str]) -> Script {
    let usage = |out: usize| json!({"promptTokenCount": 1000, "candidatesTokenCount": out, "totalTokenCount": 1000 + out});
    let text = Reply::text(split_text(&reply_text(tokens), chunks)).usage(usage(tokens));
    let mut script = Script::new().then(
        text.clone()
            .when(Matcher::function_response())
            .forever()
            .named("after a tool result"),
    );
    for name in tools {
        let args = json!({"choice": "yes", "toolSummary": "Bench tool", "toolAction": "Asking the client"});
        script = script.then(
            Reply::calls([Call::new(*name, args).exact_args()])
                .usage(usage(10))
                .when(Matcher::any().user_text_contains(format!("BENCH_CALL_TOOL:{name}")))
                .forever()
                .named(format!("call {name}")),
        );
    }
    script.default_reply(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reply_matches_fast_mock() {
        let text = reply_text(200);
        assert!(text.starts_with("alpha bravo charlie"));
        assert!(text.ends_with("romeo."), "{text}");
        assert_eq!(text.split(' ').count(), 200);
        let pieces = split_text(&text, 20);
        assert_eq!(pieces.len(), 20);
        assert_eq!(pieces.concat(), text);
        assert!(pieces[0].ends_with(' ') && !pieces[19].ends_with(' '));
        assert_eq!(pieces[0].split_whitespace().count(), 10);
        // Uneven splits put the extra words first.
        assert_eq!(split_text("a b c", 2), ["a b ", "c"]);
        assert_eq!(split_text("a", 5), ["a"]);
    }

    #[test]
    fn the_script_is_valid_and_round_trips() {
        let script = script(200, 20, &["bench_confirm"]);
        script.validate().unwrap();
        let again = Script::from_json(&script.to_json()).unwrap();
        assert_eq!(again.to_json(), script.to_json());
        assert!(script.to_json().contains("BENCH_CALL_TOOL:bench_confirm"));
    }
}
