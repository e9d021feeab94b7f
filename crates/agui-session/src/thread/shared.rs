//! The thread's shared state and the run's context, which server tools read and write while
//! they run (synchronously, through `ToolContext`) and the thread's task adopts from each run.
//!
//! It is the one piece of a thread the task does not hold alone: a tool runs on the harness's
//! callback task, reads the state, changes it and sets it back, and must see its own write at
//! once. The lock is a plain mutex held only to copy or replace a value, never across an await.

use parking_lot::{Mutex, MutexGuard};

use agui_types::Context;
use serde_json::{Map, Value};

#[derive(Debug)]
struct Inner {
    state: Value,
    /// A server write the client has not received yet (its copy predates it).
    undelivered: bool,
    context: Vec<Context>,
}

/// The shared state and context of one thread.
#[derive(Debug)]
pub(crate) struct Shared(Mutex<Inner>);

impl Default for Shared {
    fn default() -> Self {
        Self(Mutex::new(Inner {
            state: Value::Object(Map::new()),
            undelivered: false,
            context: Vec::new(),
        }))
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock()
    }

    /// Adopts the client's state and context at the start of a run. The state is kept when
    /// the server wrote a newer one the client has not received.
    pub(crate) fn adopt(&self, state: Option<&Value>, context: Vec<Context>) {
        let mut inner = self.lock();
        inner.context = context;
        if inner.undelivered {
            return;
        }
        inner.state = match state {
            Some(Value::Object(map)) => Value::Object(map.clone()),
            _ => Value::Object(Map::new()),
        };
    }

    /// A copy of the shared state.
    pub(crate) fn state(&self) -> Value {
        self.lock().state.clone()
    }

    /// Replaces the state (a server tool's write); the client has it once a snapshot of it
    /// is delivered ([`Shared::delivered`]).
    pub(crate) fn set_state(&self, state: Value) {
        let mut inner = self.lock();
        inner.state = state;
        inner.undelivered = true;
    }

    /// A state snapshot reached a client.
    pub(crate) fn delivered(&self) {
        self.lock().undelivered = false;
    }

    /// A copy of the run's context.
    pub(crate) fn context(&self) -> Vec<Context> {
        self.lock().context.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn client_state_does_not_overwrite_an_undelivered_server_write() {
        let shared = Shared::default();
        shared.adopt(Some(&json!({"a": 1})), Vec::new());
        assert_eq!(shared.state(), json!({"a": 1}));
        shared.set_state(json!({"server": true}));
        shared.adopt(Some(&json!({"a": 2})), Vec::new());
        assert_eq!(
            shared.state(),
            json!({"server": true}),
            "the client's copy predates the write"
        );
        shared.delivered();
        shared.adopt(Some(&json!({"a": 3})), Vec::new());
        assert_eq!(shared.state(), json!({"a": 3}));
        shared.adopt(Some(&json!([1])), Vec::new());
        assert_eq!(
            shared.state(),
            json!({}),
            "a state that is not an object is reset"
        );
    }
}
