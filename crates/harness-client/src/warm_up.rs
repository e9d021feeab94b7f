//! One throwaway turn on a harness process started ahead of need.
//!
//! A new `localharness` process pays for much on its first conversation's first turn (its heap
//! grows through several collections, its conversation database and model client are set up):
//! measured here, the first turn on a new process took about twice as long as the next ones.
//! A pool that starts a process before anyone needs it (a prestart or a spare, see
//! [`crate::PoolOptions::prestart_spare`]) can pay that cost then, with a [`WarmUp`]: one
//! conversation, one turn against a model endpoint that answers at once (the host's own, never
//! a paid model), then everything it left on disk is removed.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness_proto::lh::HarnessConfig;

use crate::blocking::off_runtime;
use crate::callbacks::DefaultCallbacks;
use crate::conversation::Conversation;
use crate::events::ConversationEvent;
use crate::link::ConnectOptions;
use crate::process::{HarnessProcess, ProcessOptions};

/// The longest a warm-up turn may take; past it the process is used as it is.
const WARM_UP_LIMIT: Duration = Duration::from_secs(20);

/// Builds the warm-up conversation's config for a scratch directory (its workspace and app
/// data dir go there).
type ConfigFor = dyn Fn(&Path) -> crate::Result<HarnessConfig> + Send + Sync;

/// How a pool warms the processes it starts ahead of need: the conversation config (built for
/// a scratch directory the pool creates and removes) and the one prompt sent.
///
/// The config's model endpoint should answer at once without a real model: the turn's answer
/// is thrown away.
#[derive(Clone)]
pub struct WarmUp {
    config: Arc<ConfigFor>,
    prompt: String,
}

impl fmt::Debug for WarmUp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WarmUp")
            .field("prompt", &self.prompt)
            .finish_non_exhaustive()
    }
}

impl WarmUp {
    /// A warm-up sending `prompt` in a conversation configured by `config(scratch_dir)`; the
    /// config should put its workspace and app data dir inside `scratch_dir`, which is removed
    /// afterwards.
    pub fn new(
        prompt: impl Into<String>,
        config: impl Fn(&Path) -> crate::Result<HarnessConfig> + Send + Sync + 'static,
    ) -> Self {
        Self {
            config: Arc::new(config),
            prompt: prompt.into(),
        }
    }

    /// Runs the warm-up on `process`, whose storage dir is `storage_dir`; returns why it did
    /// not complete (the process is usable either way, unless it died).
    pub(crate) async fn run(
        &self,
        process: &HarnessProcess,
        options: &ProcessOptions,
        connect: ConnectOptions,
    ) -> Result<Duration, String> {
        let started = Instant::now();
        let name = format!(".warm-up-{}", process.pid());
        let scratch = options.storage_dir.join(&name);
        let mut conversation_id = None;
        let outcome = self
            .turn(process, options, &scratch, connect, &mut conversation_id)
            .await;
        remove_leftovers(options.clone(), name, conversation_id).await;
        outcome.map(|()| started.elapsed())
    }

    /// Opens the conversation (its id into `opened`), runs the turn and closes it.
    async fn turn(
        &self,
        process: &HarnessProcess,
        options: &ProcessOptions,
        scratch: &Path,
        connect: ConnectOptions,
        opened: &mut Option<String>,
    ) -> Result<(), String> {
        let (opts, dir) = (options.clone(), scratch.to_owned());
        let made = off_runtime(move || opts.reach(&dir, true).map(drop)).await;
        match made {
            Some(Ok(())) => {}
            Some(Err(e)) => return Err(format!("cannot create {}: {e}", scratch.display())),
            None => return Err("the runtime shut down".into()),
        }
        let config = (self.config)(scratch).map_err(|e| e.to_string())?;
        let mut conversation =
            Conversation::open_with(process, config, Arc::new(DefaultCallbacks), connect)
                .await
                .map_err(|e| format!("the conversation did not open: {e}"))?;
        *opened = Some(conversation.id().to_owned());
        let ended = async {
            conversation
                .send_text(&self.prompt)
                .await
                .map_err(|e| format!("the prompt was not sent: {e}"))?;
            loop {
                match conversation.next_event().await {
                    Some(ConversationEvent::TurnEnded(_)) => return Ok(()),
                    Some(ConversationEvent::Closed(reason)) => {
                        return Err(format!("the conversation closed: {reason:?}"));
                    }
                    Some(_) => {}
                    None => return Err("the conversation closed".to_owned()),
                }
            }
        };
        let ended = match tokio::time::timeout(WARM_UP_LIMIT, ended).await {
            Ok(ended) => ended,
            Err(_) => Err(format!("the turn did not end within {WARM_UP_LIMIT:?}")),
        };
        conversation.close().await;
        ended
    }
}

/// Removes the scratch directory (`name` in the storage dir) and the conversation's database
/// (`<id>.db` and its SQLite companions there), so a warm-up leaves nothing a host would see.
/// Through the door: the storage dir is the sandbox's to write.
async fn remove_leftovers(options: ProcessOptions, name: String, conversation_id: Option<String>) {
    off_runtime(move || {
        let storage = match options.reach(&options.storage_dir, false) {
            Ok(storage) => storage,
            Err(e) => {
                tracing::warn!(dir = %options.storage_dir.display(), error = %e, "could not clean up after a warm-up");
                return;
            }
        };
        if let Err(e) = storage.remove(Path::new(&name)) {
            tracing::warn!(dir = %options.storage_dir.join(&name).display(), error = %e, "could not remove a warm-up's scratch directory");
        }
        let Some(id) = conversation_id.filter(|id| is_plain_name(id)) else {
            return;
        };
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let file = format!("{id}.db{suffix}");
            if let Err(e) = storage.remove_file(Path::new(&file)) {
                tracing::warn!(path = %options.storage_dir.join(&file).display(), error = %e, "could not remove a warm-up's conversation database");
            }
        }
    })
    .await;
}

/// Whether `id` can name a file in the storage dir and nothing outside it.
fn is_plain_name(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_conversation_ids_name_files() {
        assert!(is_plain_name("0a1b2c3d-4e5f"));
        assert!(is_plain_name("c0ffee_1"));
        for id in ["", "..", "../x", "a/b", "a.db", "a b"] {
            assert!(!is_plain_name(id), "{id:?}");
        }
    }
}
