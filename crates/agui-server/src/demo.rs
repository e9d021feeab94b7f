//! The offline demo: the embedded scripted model, and the server tool its script calls.

use agui_session::{FnTool, ToolError, ToolRegistry};
use serde_json::{Value, json};

use crate::error::ServerError;

/// Starts the scripted demo model ([`gemini_script::demo::script`]) on an ephemeral loopback
/// port.
pub(crate) async fn start_model() -> Result<gemini_script::Handle, ServerError> {
    start_model_with(gemini_script::demo::script()).await
}

/// Starts a scripted model running `script` as the demo model, on an ephemeral loopback port.
pub(crate) async fn start_model_with(
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
pub(crate) fn add_demo_tools(tools: &mut ToolRegistry) {
    if tools.get(gemini_script::demo::SERVER_TOOL).is_some() {
        return;
    }
    tools.register(weather_tool());
}

/// `get_weather(location)`: canned weather that differs by place (see [`weather`]), enough to
/// show a server tool card. The one definition behind the offline demo, `examples/minimal.rs`
/// and `examples/dojo`; a missing or blank `location` is a tool error the model sees.
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
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| ToolError::new("`location` must be a non-empty string"))?;
            Ok(weather(location))
        },
    )
}

/// What `get_weather` reports for `location`: deterministic but varied by place (two cities
/// differ), in the fields the AG-UI dojo's weather card reads: `location`, `temperature` and
/// `feelsLike` (°C), `conditions`, `humidity` (%), `windSpeed` (km/h).
pub fn weather(location: &str) -> Value {
    let seed = location.bytes().fold(7u32, |acc, b| {
        acc.wrapping_mul(31).wrapping_add(u32::from(b))
    });
    let conditions = ["Sunny", "Partly cloudy", "Light rain", "Windy", "Clear"];
    let temperature = 8 + seed % 20;
    json!({
        "location": location,
        "temperature": temperature,
        "feelsLike": temperature.saturating_sub(seed % 4),
        "conditions": conditions[seed as usize % conditions.len()],
        "humidity": 35 + seed % 55,
        "windSpeed": 3 + seed % 25,
    })
}
