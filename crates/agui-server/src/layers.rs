//! The layering of the configuration: built-in defaults, the file, then environment variables
//! and flags, merged into a [`ServerConfig`] and checked as serving it would check it. Apart
//! from the configuration's data so that the data needs nothing of the command line, the
//! access policy or the agents' build, which all read it.

use std::path::PathBuf;
use std::time::Duration;

use crate::access::AccessPolicy;
use crate::build;
use crate::cli::ServeArgs;
use crate::config::{
    AgentSettings, AuthTokens, FileConfig, ServerConfig, normalise_path, read_key_file, replica_id,
    slug,
};
use crate::defaults;
use crate::error::{ConfigProblem, ServerError};

impl ServerConfig {
    /// Merges the layers; `cli` holds flag and environment values. The result is checked the
    /// way serving it would check it (every agent's options are built, directories claimed),
    /// so `check-config` refuses exactly what `serve` would.
    pub fn merge(file: FileConfig, cli: &ServeArgs) -> Result<Self, ServerError> {
        let defaults = file.agent.clone().overlaid(&cli.agent);
        let entries = if file.agents.is_empty() {
            vec![AgentSettings::default()]
        } else {
            file.agents.clone()
        };
        let several = !file.agents.is_empty();
        let mut agents = Vec::new();
        for entry in entries {
            let mut agent = defaults.clone().overlaid(&entry);
            let path = normalise_path(agent.path.as_deref().unwrap_or("/"))?;
            if several {
                // Directories shared by every `[[agents]]` entry get one subfolder per agent:
                // agents must never read each other's conversations or workspaces.
                let own = |dir: &Option<PathBuf>| dir.as_ref().map(|d| d.join(slug(&path)));
                if entry.save_dir.is_none() {
                    agent.save_dir = own(&defaults.save_dir);
                }
                if entry.workspace_root.is_none() {
                    agent.workspace_root = own(&defaults.workspace_root);
                }
            }
            if agents
                .iter()
                .any(|a: &AgentSettings| a.path.as_deref() == Some(path.as_str()))
            {
                return Err(ServerError::config(
                    ConfigProblem::Conflict,
                    format!("two agents are mounted at `{path}`"),
                ));
            }
            agent.path = Some(path);
            if let Some(file) = &agent.api_key_file {
                agent.api_key = Some(read_key_file(file)?);
            }
            agents.push(agent);
        }
        // The flags and the environment over the file.
        let keys = file.server_keys().overlaid(&cli.server);
        let bind = match keys.bind {
            Some(bind) => bind,
            None => defaults::BIND.parse().expect("the default address parses"),
        };
        let config = Self {
            bind,
            auth_token: keys.auth_token.filter(|t| !t.is_empty()),
            auth_tokens: match &cli.auth_tokens {
                Some(pairs) => pairs.iter().cloned().collect(),
                None => file
                    .auth_tokens
                    .as_ref()
                    .map(AuthTokens::by_identity)
                    .unwrap_or_default(),
            },
            user_header: keys.user_header.filter(|h| !h.trim().is_empty()),
            insecure_no_auth: keys.insecure_no_auth.unwrap_or(defaults::INSECURE_NO_AUTH),
            proxy_token: keys.proxy_token.filter(|t| !t.is_empty()),
            metrics_token: keys.metrics_token.filter(|t| !t.is_empty()),
            insecure_unconfined: keys
                .insecure_unconfined
                .unwrap_or(defaults::INSECURE_UNCONFINED),
            ready_without_sandbox: keys
                .ready_without_sandbox
                .unwrap_or(defaults::READY_WITHOUT_SANDBOX),
            cors_origins: keys.cors_origins.unwrap_or_default(),
            allowed_hosts: keys.allowed_hosts.unwrap_or_default(),
            max_body_bytes: keys.max_body_bytes.unwrap_or(defaults::MAX_BODY_BYTES),
            keep_alive: Duration::from_secs(
                keys.keep_alive_secs
                    .unwrap_or(defaults::KEEP_ALIVE_SECS)
                    .max(1),
            ),
            demo: keys.demo.unwrap_or(defaults::DEMO),
            log_format: keys.log_format.unwrap_or(defaults::LOG_FORMAT),
            model_proxy_port: keys.model_proxy_port.unwrap_or(defaults::MODEL_PROXY_PORT),
            replica_id: replica_id(keys.replica_id)?,
            lease_ttl: Duration::from_secs(
                keys.lease_ttl_secs
                    .unwrap_or(defaults::LEASE_TTL_SECS)
                    .max(3),
            ),
            sandbox_uid: keys.sandbox_uid,
            agents,
            config_file: cli.config.clone(),
        };
        AccessPolicy::new(&config)?;
        config.check_unconfined()?;
        build::check(&config)?;
        Ok(config)
    }
}
