//! The state every handler shares: the engine and the server's shutdown signal. Its own module
//! so that the model routes and the control routes both depend on it, not on each other.

use parking_lot::{Mutex, MutexGuard};

use tokio::sync::watch;

use crate::engine::Engine;

/// State shared by the handlers and the server's handle.
pub(crate) struct Shared {
    engine: Mutex<Engine>,
    shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// State serving `engine` until `shutdown` turns true.
    pub(crate) fn new(engine: Engine, shutdown: watch::Receiver<bool>) -> Self {
        Self {
            engine: Mutex::new(engine),
            shutdown,
        }
    }

    /// The engine; a panic elsewhere must not make the server unusable.
    pub(crate) fn engine(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock()
    }

    /// Turns true when the server shuts down, so open streams end.
    pub(crate) fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }
}
