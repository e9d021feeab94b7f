//! The dojo's offline model: a scripted stand-in for Gemini that exercises every dojo feature.
//!
//! It is built from the rules of `gemini_script::demo` (its word lists, and its weather,
//! background, page-tool and harness-injection entries) plus the dojo's own, and like the demo
//! script it is stateless: every entry repeats forever and looks only at the request (the prompt's words, the declared tools, the last tool result), so any
//! number of threads on any of the dojo's agents share one scripted model. Which agent is asking
//! shows in the tools it declares.
//!
//! | agent (declares) | the user says | the model |
//! |---|---|---|
//! | `interrupt` (`schedule_meeting`) | meeting / schedule / book / appointment | calls `schedule_meeting`, then reports the booking |
//! | `shared_state` (`research_agent`) | research / delegate / investigate / look into / find out | calls `research_agent{task: <prompt>}`, then sums up |
//! | `backend_tool_rendering` (`get_weather`) | weather / forecast / temperature | calls `get_weather{location}`, then points at the card |
//! | `human_in_the_loop` (page tool `generate_task_steps`) | plan / steps / task / trip / make / … | proposes steps with `generate_task_steps`, then confirms the user's choice |
//! | any page with `change_background` | background / colour / theme | calls it, then confirms |
//! | any page with a tool of its own | frontend / client tool / page tool | calls the first such tool, then reports its result |
//! | any | think / reason / explain / why / how | streams reasoning, then an explanation |
//! | any | anything else | introduces the agent it is talking as, with things to try |

use gemini_script::demo::{
    REASONING_WORDS, WEATHER_WORDS, always, background_call, background_result, other_tool_result,
    page_tool_call, prompt, streamed, system_message, text_reply, weather_call,
};
use gemini_script::{Matcher, Reply, Script};
use serde_json::json;

/// The frontend tool the dojo's human-in-the-loop page declares.
pub(crate) const STEPS_TOOL: &str = "generate_task_steps";

const MEETING_WORDS: &[&str] = &["meeting", "schedule", "book", "appointment", "calendar"];
const RESEARCH_WORDS: &[&str] = &[
    "research",
    "delegate",
    "investigate",
    "look into",
    "find out",
];
const STEPS_WORDS: &[&str] = &[
    "plan", "step", "task", "trip", "make", "build", "prepare", "organi", "help me",
];

const EXPLANATION: &str = "Your message went over AG-UI to the dojo server, which handed it to \
the Antigravity harness of this agent. The harness asked its model (me, a scripted stand-in for \
Gemini) what to do. I answer in text or ask for tools: server tools run in the dojo server, page \
tools are sent back to your browser, and everything comes back to you as AG-UI events.";

/// The steps proposed to the human-in-the-loop page, all enabled; the user unticks some.
fn proposed_steps() -> serde_json::Value {
    let steps = [
        "Gathering the requirements",
        "Researching the options",
        "Drafting a plan",
        "Checking the budget",
        "Booking what is needed",
        "Preparing the materials",
        "Doing the work",
        "Reviewing the result",
    ];
    steps
        .iter()
        .map(|s| json!({"description": s, "status": "enabled"}))
        .collect()
}

/// The dojo script.
pub(crate) fn script() -> Script {
    let intro = |text: &str| {
        Reply::text(format!(
            "Hi! I'm the **offline demo model** of the agui-antigravity dojo: a scripted \
             stand-in for Gemini, talking to you through a real Antigravity harness.\n\n{text}"
        ))
        .thought("The user said \"{{user_text}}\". I'll say what this agent can show.")
    };
    Script::new()
        // Tool results first: the prompt's keywords are still in these requests.
        .then(always(
            "schedule_meeting result",
            Reply::text("The scheduler reports: {{tool_output}}"),
            Matcher::function_response_to("schedule_meeting"),
        ))
        .then(always(
            "research_agent result",
            Reply::text(
                "The research agent is done, and the delegation is recorded in the shared \
                 state (`delegations`). It reported:\n\n{{tool_output}}",
            ),
            Matcher::function_response_to("research_agent"),
        ))
        .then(always(
            "get_weather result",
            Reply::text(
                "Here's the weather in {{location}}; the card above shows the details. \
                 Ask me about another city!",
            ),
            Matcher::function_response_to("get_weather"),
        ))
        .then(always(
            "generate_task_steps result",
            Reply::text(
                "Thanks for reviewing the plan! I'll go ahead with what you chose:\n\n\
                 {{tool_output}}",
            ),
            Matcher::function_response_to(STEPS_TOOL),
        ))
        .then(background_result())
        .then(other_tool_result())
        // Calls, when the agent has the tool.
        .then(always(
            "schedule_meeting",
            Reply::call(
                "schedule_meeting",
                json!({"topic": "Intro call", "attendee": "the sales team"}),
            )
            .thought("I'll book it with schedule_meeting; it asks the user for a time itself."),
            prompt(MEETING_WORDS).declares("schedule_meeting"),
        ))
        .then(always(
            "research_agent",
            Reply::call("research_agent", json!({"task": "{{user_text}}"}))
                .thought("I'll delegate this to the research agent."),
            prompt(RESEARCH_WORDS).declares("research_agent"),
        ))
        .then(weather_call())
        .then(always(
            "generate_task_steps",
            Reply::call(STEPS_TOOL, json!({"steps": proposed_steps()}))
                .thought("I'll propose steps and let the user choose which to keep."),
            prompt(STEPS_WORDS).declares(STEPS_TOOL),
        ))
        .then(background_call())
        .then(page_tool_call(&[
            "get_weather",
            "research_agent",
            "schedule_meeting",
        ]))
        // The same words on an agent without the tool: say where the feature lives.
        .then(text_reply(
            "schedule_meeting elsewhere",
            MEETING_WORDS,
            "Meetings are booked by the **interrupt** agent (`/interrupt`).",
        ))
        .then(text_reply(
            "research_agent elsewhere",
            RESEARCH_WORDS,
            "Research is delegated by the **shared state** agent (`/shared_state`).",
        ))
        .then(text_reply(
            "get_weather elsewhere",
            WEATHER_WORDS,
            "The weather tool belongs to the **backend tool rendering** agent \
                 (`/backend_tool_rendering`).",
        ))
        .then(always(
            "reasoning",
            Reply::text(EXPLANATION).thought([
                "**Following a message** The user wants to know how this works. ",
                "I'll trace it: AG-UI client, dojo server, harness, model, and back as events.",
            ]),
            prompt(REASONING_WORDS),
        ))
        .then(system_message())
        // Introductions, by agent.
        .then(always(
            "interrupt intro",
            intro(
                "I book meetings. Ask me to **schedule a meeting**: my `schedule_meeting` tool \
                 pauses the run on an interrupt until you pick a time.",
            ),
            Matcher::user_text().declares("schedule_meeting"),
        ))
        .then(always(
            "shared_state intro",
            intro(
                "I delegate research. Ask me to **research** something: my `research_agent` \
                 tool records each delegation in the shared state as it works.",
            ),
            Matcher::user_text().declares("research_agent"),
        ))
        .then(always(
            "backend_tool_rendering intro",
            intro(
                "Ask me about **the weather in Tokyo**: my `get_weather` tool runs on the \
                 server and the page draws its result as a card.",
            ),
            Matcher::user_text().declares("get_weather"),
        ))
        .then(always(
            "human_in_the_loop intro",
            intro(
                "Ask me to **plan a task**, e.g. a trip to Mars: I'll propose steps with your \
                 page's `generate_task_steps` tool and wait for you to choose.",
            ),
            Matcher::user_text().declares(STEPS_TOOL),
        ))
        .then(always(
            "agentic_chat intro",
            intro(CHAT_INTRO),
            Matcher::any(),
        ))
        .default_reply(streamed(intro(CHAT_INTRO)))
}

const CHAT_INTRO: &str = "This is plain chat. Ask me to **explain** how the dojo works, or to \
**change the background** if your page offers that tool.";
