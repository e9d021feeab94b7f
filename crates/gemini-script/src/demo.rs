//! The offline demo script: a keyless stand-in for Gemini that shows the product.
//!
//! It answers by keyword, statelessly (every entry repeats forever and looks
//! only at the request: the last part kind, the prompt's words and the
//! declared tools), so any number of conversations can share one server:
//!
//! | the user says | the model |
//! |---|---|
//! | list / files / folder / directory / workspace | thinks, calls the built-in `list_dir` on the workspace (if declared), then summarises the listing |
//! | weather / forecast / temperature | calls the server tool `get_weather{location}` (if declared), then reports the result |
//! | background / color / colour / theme | calls the frontend tool `change_background{background}` (if declared), then confirms |
//! | frontend / client tool / page tool | calls the first declared non-built-in tool other than `get_weather`, then reports its result |
//! | think / reason / explain / why / how | streams reasoning, then an explanation |
//! | anything else | streams a short thought, then an introduction with things to try |
//!
//! When a keyword's tool is not declared the model says so instead of calling it.
//!
//! The word lists and the rules every demo page shares (the weather, background and page-tool
//! calls, their results, harness injections) are public, so a script for other demo pages (the
//! dojo example's) is built from the same rules.

use serde_json::json;

use crate::{
    matcher::Matcher,
    reply::{Call, Reply},
    script::{Entry, Script},
};

/// Pause between streamed events, so the stream is visible in a UI.
const DELAY_MS: u64 = 30;

/// Words of a prompt asking to list the workspace.
pub const LIST_WORDS: &[&str] = &["list", "files", "folder", "directory", "workspace"];
/// Words of a prompt asking for the weather.
pub const WEATHER_WORDS: &[&str] = &["weather", "forecast", "temperature"];
/// Words of a prompt asking to change the page's background.
pub const BACKGROUND_WORDS: &[&str] = &["background", "color", "colour", "theme"];
/// Words of a prompt asking to call one of the page's own tools.
pub const FRONTEND_WORDS: &[&str] = &["frontend", "client tool", "page tool", "ui tool"];
/// Words of a prompt asking for an explanation (answered with reasoning first).
pub const REASONING_WORDS: &[&str] = &["think", "reason", "explain", "why", "how"];

/// The frontend tool the demo page is expected to offer.
pub const FRONTEND_TOOL: &str = "change_background";
/// The server-side tool the demo server is expected to offer.
pub const SERVER_TOOL: &str = "get_weather";

const INTRO: &str = "Hi! I'm the **offline demo model** of agui-antigravity: a scripted \
stand-in for Gemini, so this runs without an API key. The Antigravity agent harness is real, \
though: it streams my reasoning and answers to you and runs the tools I ask for.\n\n\
Try asking me to:\n\
- **list the files** in the workspace (a built-in harness tool),\n\
- tell you **the weather in Tokyo** (a server-side tool),\n\
- **change the background** (a frontend tool, if this page offers one),\n\
- **explain** how this demo works (reasoning).";

const EXPLANATION: &str = "Here's how this demo works. Your message travels over AG-UI to the \
server, which hands it to the Antigravity harness. The harness asks its model (me, a scripted \
Gemini endpoint) what to do next. I stream back thoughts and text, or ask for tools: built-in \
tools run inside the harness, server tools run in the server, and frontend tools are sent back \
to your browser. Every step flows back to you as AG-UI events.";

/// `reply` streamed two words at a time, paced so the stream is visible in a UI.
pub fn streamed(reply: Reply) -> Reply {
    reply.chunk_words(2).delay_ms(DELAY_MS)
}

/// A user prompt (not a harness injection) containing one of `words`.
pub fn prompt(words: &[&str]) -> Matcher {
    Matcher::user_text()
        .system_message(false)
        .keywords(words.iter().copied())
}

/// An entry named `name` answering every request `matcher` accepts with `reply`
/// ([`streamed`]), forever: a script made of these is stateless.
pub fn always(name: &str, reply: Reply, matcher: Matcher) -> Entry {
    streamed(reply).when(matcher).forever().named(name)
}

/// A prompt containing one of `words`: answered with `text` alone (a feature this agent
/// cannot show, with where to find it).
pub fn text_reply(name: &str, words: &[&str], text: &str) -> Entry {
    always(name, Reply::text(text), prompt(words))
}

/// After [`FRONTEND_TOOL`]'s result: confirms the change.
pub fn background_result() -> Entry {
    always(
        "background result",
        Reply::text("Done! I changed the background. Ask me again for another look."),
        Matcher::function_response_to(FRONTEND_TOOL),
    )
}

/// After any other tool's result: shows it as it came.
pub fn other_tool_result() -> Entry {
    always(
        "other tool result",
        Reply::text("The `{{tool_name}}` tool returned:\n\n```\n{{tool_output}}\n```"),
        Matcher::function_response(),
    )
}

/// A weather prompt to an agent that declares [`SERVER_TOOL`]: calls it for the prompt's
/// location.
pub fn weather_call() -> Entry {
    always(
        "weather",
        Reply::default()
            .with_call(Call::new(SERVER_TOOL, json!({"location": "{{location}}"})).fill_required())
            .thought("I'll look up the weather in {{location}} with the get_weather tool."),
        prompt(WEATHER_WORDS).declares(SERVER_TOOL),
    )
}

/// A background prompt to a page that declares [`FRONTEND_TOOL`]: calls it with a gradient.
pub fn background_call() -> Entry {
    always(
        "background",
        Reply::default()
            .with_call(
                Call::new(
                    FRONTEND_TOOL,
                    json!({"background": "linear-gradient(135deg, #667eea 0%, #764ba2 100%)"}),
                )
                .fill_required(),
            )
            .thought("The page offers change_background. I'll pick a purple gradient."),
        prompt(BACKGROUND_WORDS).declares(FRONTEND_TOOL),
    )
}

/// A prompt asking for a page tool: calls the first declared tool that is neither built in
/// nor one of `server_tools`, with its required arguments filled in.
pub fn page_tool_call(server_tools: &[&str]) -> Entry {
    always(
        "frontend tool",
        Reply::calls([Call::first_declared_except(
            server_tools.iter().copied(),
            json!({}),
        )])
        .thought("I'll call one of the tools this page provides."),
        prompt(FRONTEND_WORDS),
    )
}

/// A message the harness injects as the user's (`<SYSTEM_MESSAGE>`): acknowledged briefly.
pub fn system_message() -> Entry {
    always(
        "system message",
        Reply::text("Noted."),
        Matcher::user_text().system_message(true),
    )
}

/// The demo script. Its default reply is the introduction.
pub fn script() -> Script {
    let intro = || {
        Reply::text(INTRO).thought(
            "The user said \"{{user_text}}\". I'll introduce myself and suggest a few things to try.",
        )
    };
    Script::new()
        // Tool results first: the prompt's keywords are still visible in these requests.
        .then(always(
            "list_dir result",
            Reply::text(
                "Here's what I found in your workspace:\n\n```\n{{tool_output}}\n```\n\n\
                 Want me to look at anything else?",
            )
            .thought("The listing came back. I'll show it to the user."),
            Matcher::function_response_to("list_dir"),
        ))
        .then(always(
            "weather result",
            Reply::text(
                "The weather tool says:\n\n```json\n{{tool_output}}\n```\n\nEnjoy your day!",
            ),
            Matcher::function_response_to(SERVER_TOOL),
        ))
        .then(background_result())
        .then(other_tool_result())
        .then(always(
            "list files",
            Reply::call("list_dir", json!({"DirectoryPath": "{{workspace}}"}))
                .thought("The user wants to see the workspace. I'll list its directory."),
            prompt(LIST_WORDS).declares("list_dir"),
        ))
        .then(weather_call())
        .then(background_call())
        .then(page_tool_call(&[SERVER_TOOL]))
        .then(text_reply(
            "list files unavailable",
            LIST_WORDS,
            "I'd list your workspace, but the `list_dir` tool isn't enabled for this agent.",
        ))
        .then(text_reply(
            "weather unavailable",
            WEATHER_WORDS,
            "I'd check the weather, but no `get_weather` tool is available right now.",
        ))
        .then(text_reply(
            "background unavailable",
            BACKGROUND_WORDS,
            "I can't change the background: this page doesn't offer a `change_background` tool.",
        ))
        .then(text_reply(
            "frontend tool unavailable",
            FRONTEND_WORDS,
            "This page doesn't offer any frontend tools right now, so there's nothing for me to call.",
        ))
        .then(always(
            "reasoning",
            Reply::text(EXPLANATION).thought([
                "**Understanding the question** The user wants an explanation. ",
                "I'll follow a message's path: AG-UI client, server, harness, model, and back as events.",
            ]),
            prompt(REASONING_WORDS),
        ))
        .then(system_message())
        .then(always("introduction", intro(), Matcher::any()))
        .default_reply(streamed(intro()))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::{engine::Engine, log::AnsweredBy, render::Plan, template::RequestCtx};

    fn request(last: Value, tools: &[&str]) -> Value {
        let declarations: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t, "parametersJsonSchema": {"type": "object", "required": []}}))
            .collect();
        json!({
            "systemInstruction": {"parts": [{"text": "Active Workspaces:\n- /demo/ws\n"}]},
            "contents": [{"role": "user", "parts": [{"text": "<USER_REQUEST>\nearlier\n</USER_REQUEST>"}]}, last],
            "tools": [{"functionDeclarations": declarations}]
        })
    }

    fn user(text: &str) -> Value {
        json!({"role": "user", "parts": [{"text": format!("<USER_REQUEST>\n{text}\n</USER_REQUEST>")}]})
    }

    fn result(name: &str) -> Value {
        json!({"role": "model", "parts": [{"functionResponse": {"name": name, "response": {"output": "Created At: a\nCompleted At: b\nok"}}}]})
    }

    /// Which demo entry answers, and the names of the functions it calls.
    fn check(last: Value, tools: &[&str], entry: &str, calls: &[&str]) {
        let body = request(last, tools);
        let raw = body.to_string();
        let ctx = RequestCtx {
            model: "m",
            raw: &raw,
            body: &body,
        };
        let (answered, plan) = Engine::new(script()).pick(&ctx, "r");
        assert_eq!(
            answered,
            AnsweredBy::Entry {
                index: answered.entry_index().unwrap_or(usize::MAX),
                name: Some(entry.into())
            },
            "for {:?} with tools {tools:?}",
            body["contents"][1]
        );
        let Plan::Stream { events, .. } = plan else {
            panic!("demo replies stream")
        };
        let called: Vec<String> = events
            .iter()
            .flat_map(|e| {
                e["candidates"][0]["content"]["parts"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|p| p["functionCall"]["name"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(called, calls, "calls for entry {entry}");
    }

    #[test]
    fn routes_prompts_by_keyword_and_declared_tools() {
        let all = [
            "list_dir",
            "run_command",
            SERVER_TOOL,
            FRONTEND_TOOL,
            "confetti",
        ];
        check(
            user("What files are in my workspace?"),
            &all,
            "list files",
            &["list_dir"],
        );
        check(
            user("List the folder"),
            &["run_command"],
            "list files unavailable",
            &[],
        );
        check(user("weather in Tokyo?"), &all, "weather", &[SERVER_TOOL]);
        check(
            user("weather in Tokyo?"),
            &["list_dir"],
            "weather unavailable",
            &[],
        );
        check(
            user("Change the background"),
            &all,
            "background",
            &[FRONTEND_TOOL],
        );
        check(
            user("Use a frontend tool"),
            &["list_dir", SERVER_TOOL, "confetti"],
            "frontend tool",
            &["confetti"],
        );
        check(
            user("Change the background"),
            &["list_dir", "confetti"],
            "background unavailable",
            &[],
        );
        check(
            user("Use a frontend tool"),
            &["list_dir", SERVER_TOOL],
            "frontend tool unavailable",
            &[],
        );
        check(user("Explain this demo"), &all, "reasoning", &[]);
        check(user("Hi"), &all, "introduction", &[]);
        check(result("list_dir"), &all, "list_dir result", &[]);
        check(result(SERVER_TOOL), &all, "weather result", &[]);
        check(result(FRONTEND_TOOL), &all, "background result", &[]);
        check(result("confetti"), &all, "other tool result", &[]);
        check(
            json!({"role": "user", "parts": [{"text": "The following is a <SYSTEM_MESSAGE> not actually sent by the user. list files"}]}),
            &all,
            "system message",
            &[],
        );
    }

    #[test]
    fn the_demo_script_is_valid_and_stateless() {
        let script = script();
        script.validate().expect("valid demo script");
        assert!(
            script
                .replies
                .iter()
                .all(|e| e.repeat == crate::script::Repeat::Forever),
            "every demo entry must repeat forever so the demo is stateless"
        );
    }
}
