//! The offline demo: the embedded scripted model, and the server tool its script calls.

use agui_session::{FnTool, ToolRegistry};
use serde_json::json;

use crate::error::ServerError;

/// Starts the scripted demo model ([`gemini_script::demo::script`]) on an ephemeral loopback
/// port.
pub async fn start_model() -> Result<gemini_script::Handle, ServerError> {
    start_model_with(gemini_script::demo::script()).await
}

/// Starts a scripted model running `script` as the demo model, on an ephemeral loopback port.
pub async fn start_model_with(
    script: gemini_script::Script,
) -> Result<gemini_script::Handle, ServerError> {
    let handle = gemini_script::ScriptedModel::start(script).await?;
    tracing::warn!(
        base_url = %handle.base_url(),
        "DEMO MODE: answers come from the embedded scripted model, not Gemini. Pass --api-key (or set \
         GEMINI_API_KEY) and --model to talk to a real model."
    );
    Ok(handle)
}

/// Adds the demo's `get_weather` server tool, unless the registry already has one.
pub fn add_demo_tools(tools: &mut ToolRegistry) {
    if tools.get(gemini_script::demo::SERVER_TOOL).is_some() {
        return;
    }
    tools.register(weather_tool());
}

/// `get_weather(location)`: canned weather, enough to show a server tool card.
pub fn weather_tool() -> FnTool {
    FnTool::new(
        gemini_script::demo::SERVER_TOOL,
        "Get the current weather for a location.",
        json!({
            "type": "object",
            "properties": {"location": {"type": "string", "description": "A city name"}},
            "required": ["location"]
        }),
        |_ctx, args| async move {
            let location = args
                .get("location")
                .and_then(|v| v.as_str())
                .unwrap_or("somewhere")
                .to_owned();
            // Deterministic but varied by place, so two cities differ.
            let seed = location.bytes().fold(7u32, |acc, b| {
                acc.wrapping_mul(31).wrapping_add(u32::from(b))
            });
            let conditions = ["sunny", "partly cloudy", "light rain", "windy", "clear"];
            Ok(json!({
                "location": location,
                "temperature_c": 12 + (seed % 15),
                "conditions": conditions[(seed as usize) % conditions.len()],
                "humidity_percent": 40 + (seed % 50),
            }))
        },
    )
}
