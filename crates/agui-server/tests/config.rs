//! The README's configuration table against the code, through the binary's `check-config` (the
//! same parsing and checks as `serve`): every documented key is accepted where the README says
//! (TOML, flag, environment variable) and changes the configuration; every enum-like key refuses
//! bad values with an error naming the key, the value and the valid values; the documented
//! defaults are the code's; and every key the code reads is documented.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use agui_server::cli::Cli;
use agui_server::{AgentSettings, FileConfig};

/// One key of the README's table.
#[derive(Debug, Clone)]
struct Key {
    key: String,
    /// `--flag`, when the README documents one.
    flag: Option<String>,
    /// The environment variable, when the README documents one.
    env: Option<String>,
    /// The default as written (backquotes and explanations in parentheses removed).
    default: String,
}

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(path).expect("the README")
}

/// The rows of the README's configuration table, one entry per key.
fn documented_keys() -> Vec<Key> {
    let text = readme();
    let section = text
        .split("\n## Configuration")
        .nth(1)
        .expect("a Configuration section");
    let mut keys = Vec::new();
    for line in section.lines().skip_while(|l| !l.starts_with("| key")) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 || cells[1].starts_with("key") || cells[1].starts_with("---") {
            continue;
        }
        let names = quoted(cells[1]);
        let flags = flags(cells[2], &names);
        let defaults = split_top(&strip_parentheses(cells[3]));
        for (i, name) in names.iter().enumerate() {
            let default = match defaults.len() {
                1 => defaults[0].clone(),
                n if n == names.len() => defaults[i].clone(),
                _ => panic!("row of {names:?}: one default or one per key"),
            };
            let (flag, env) = flags[i].clone();
            keys.push(Key {
                key: name.clone(),
                flag,
                env,
                default: default.replace('`', ""),
            });
        }
    }
    assert!(keys.len() > 40, "the table was read: {keys:?}");
    keys
}

/// The backquoted words of a cell.
fn quoted(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// `(flag, env)` per key of a flag / env cell.
fn flags(cell: &str, names: &[String]) -> Vec<(Option<String>, Option<String>)> {
    if cell.contains("only") {
        return vec![(None, None); names.len()];
    }
    if cell.starts_with("same flag") {
        return names
            .iter()
            .map(|n| (Some(format!("--{}", n.replace('_', "-"))), None))
            .collect();
    }
    let parts = split_top(cell);
    assert_eq!(parts.len(), names.len(), "one flag per key in `{cell}`");
    parts
        .iter()
        .map(|part| {
            let words = quoted(part);
            let flag = words
                .iter()
                .find(|w| w.starts_with("--"))
                .map(|w| w.split(' ').next().unwrap_or(w).to_owned());
            let env = words
                .iter()
                .find(|w| w.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
                .cloned();
            (flag, env)
        })
        .collect()
}

/// `text` without its parenthesised explanations.
fn strip_parentheses(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out.trim().to_owned()
}

/// `text` split at `, ` outside backquotes.
fn split_top(text: &str) -> Vec<String> {
    let mut parts = vec![String::new()];
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '`' {
            quoted = !quoted;
        }
        if c == ',' && !quoted && chars.peek() == Some(&' ') {
            chars.next();
            parts.push(String::new());
            continue;
        }
        parts.last_mut().expect("a part").push(c);
    }
    parts.iter().map(|p| p.trim().to_owned()).collect()
}

/// A valid value of `key`: its TOML form and its flag / environment form, and a key it needs.
fn sample(key: &str) -> (&'static str, &'static str, Option<&'static str>) {
    match key {
        "bind" => ("\"127.0.0.1:9999\"", "127.0.0.1:9999", None),
        "demo" => ("true", "true", None),
        "auth_token" => ("\"token-0123456789ab\"", "token-0123456789ab", None),
        "cors_origins" => ("[\"https://a.example\"]", "https://a.example", None),
        "auth_tokens" => (
            "{ alice = \"alice-token-0123456\" }",
            "alice=alice-token-0123456",
            None,
        ),
        "user_header" => ("\"X-Forwarded-User\"", "X-Forwarded-User", None),
        "insecure_no_auth" => ("true", "true", None),
        "allowed_hosts" => ("[\"app.example\"]", "app.example", None),
        "max_body_bytes" => ("1024", "1024", None),
        "path" => ("\"/p\"", "/p", None),
        "name" => ("\"n\"", "n", None),
        "keep_alive_secs" => ("5", "5", None),
        "log_format" => ("\"json\"", "json", None),
        "model_proxy_port" => ("18999", "18999", None),
        "replica_id" => ("\"r1\"", "r1", None),
        "lease_ttl_secs" => ("30", "30", None),
        "model" => ("\"m\"", "m", None),
        "api_key" => ("\"k\"", "k", None),
        // A file `check_config` writes in the directory it runs in.
        "api_key_file" => ("\"api.key\"", "api.key", None),
        "gemini_base_url" => (
            "\"http://127.0.0.1:1\"",
            "http://127.0.0.1:1",
            Some("api_key"),
        ),
        "model_headers" => ("{ x-a = \"b\" }", "x-a=b", None),
        "thinking_level" => ("\"low\"", "low", None),
        "vertex_project" => ("\"p\"", "p", Some("vertex_location")),
        "vertex_location" => ("\"us-central1\"", "us-central1", None),
        "openai_base_url" => ("\"http://127.0.0.1:1\"", "http://127.0.0.1:1", None),
        "image_model" => ("\"i\"", "i", None),
        "system_instructions" => ("\"s\"", "s", None),
        "system_instructions_mode" => ("\"replace\"", "replace", None),
        "builtin_tools" => ("[\"list_dir\", \"view_file\"]", "list_dir,view_file", None),
        "behavior" => ("\"interactive\"", "interactive", None),
        "tool_approval" => ("true", "true", None),
        "auto_approve_tools" => ("[\"view_file\"]", "view_file", None),
        "frontend_tools" => ("false", "false", None),
        "ask_question" => ("false", "false", None),
        "interrupt_reasons" => ("\"reference\"", "reference", None),
        "deduplicate_tool_calls" => ("false", "false", None),
        "rewind_files" => ("true", "true", None),
        "app_context_tool" => ("true", "true", None),
        "app_state_tool" => ("true", "true", None),
        "response_schema" => ("{ type = \"object\" }", "{\"type\":\"object\"}", None),
        "structured_output" => ("\"custom\"", "custom", None),
        "emit_builtin_tool_calls" => ("false", "false", None),
        "subagent_events" => ("\"steps\"", "steps", None),
        "activities" => ("false", "false", None),
        "max_tool_calls_per_turn" => ("5", "5", None),
        "workspace_root" => ("\"/tmp/agui-w\"", "/tmp/agui-w", None),
        "save_dir" => ("\"/tmp/agui-s\"", "/tmp/agui-s", None),
        "harness_path" => ("\"/opt/localharness\"", "/opt/localharness", None),
        "pool_size" => ("2", "2", None),
        "harness_idle_grace_secs" => ("5", "5", None),
        "prestart_harness" => ("false", "false", None),
        "max_spare_harnesses" => ("4", "4", None),
        "session_timeout_secs" => ("100", "100", None),
        "parked_timeout_secs" => ("200", "200", None),
        "hibernate_after_secs" => ("10", "10", None),
        "max_sessions" => ("3", "3", None),
        "busy_thread_wait_secs" => ("0", "0", None),
        "api_retries" => ("2", "2", None),
        "max_attachment_bytes" => ("1000", "1000", None),
        "on_disconnect" => ("\"cancel\"", "cancel", None),
        "turn_stall_timeout_secs" => ("60", "60", None),
        "client_buffer_events" => ("100", "100", None),
        "sandbox" => ("\"off\"", "off", None),
        "insecure_unconfined" => ("true", "true", None),
        "ready_without_sandbox" => ("true", "true", None),
        "egress_allow" => ("[\"pypi.org\"]", "pypi.org", None),
        "sandbox_ro_paths" => ("[\"/usr\"]", "/usr", None),
        "sandbox_max_pids" => ("256", "256", None),
        "sandbox_memory_mb" => ("1024", "1024", None),
        "sandbox_tmp_mb" => ("64", "64", None),
        "sandbox_file_mb" => ("100", "100", None),
        "sandbox_uid" => ("1000", "1000", None),
        "workspace_max_mb" => ("1000", "1000", None),
        "workspace_template" => ("\"/usr\"", "/usr", None),
        "model_max_request_mb" => ("16", "16", None),
        "model_max_concurrent_calls" => ("4", "4", None),
        "model_calls_per_minute" => ("60", "60", None),
        "max_threads_per_owner" => ("10", "10", None),
        "max_runs_per_owner" => ("2", "2", None),
        "thread_retention_days" => ("7", "7", None),
        "proxy_token" => (
            "\"proxy-token-0123456\"",
            "proxy-token-0123456",
            Some("user_header"),
        ),
        "metrics_token" => ("\"metrics-token-01234\"", "metrics-token-01234", None),
        other => panic!("no sample value for `{other}`: add one to this test"),
    }
}

/// The server-wide keys (top of the file); the others are agent keys (`[agent]`).
fn server_keys() -> BTreeSet<&'static str> {
    field_names::<FileConfig>()
        .into_iter()
        .filter(|k| !matches!(*k, "agent" | "agents"))
        .collect()
}

/// How a key is set in a test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Toml,
    Flag,
    Env,
}

/// `check-config` with each `(key, value, via)` set: `value` is a TOML literal for
/// [`Via::Toml`], else the flag's or variable's text.
fn check_config(dir: &Path, setting: &[(&Key, &str, Via)]) -> Output {
    std::fs::write(dir.join("api.key"), "k\n").expect("a key file");
    let mut command = Command::new(env!("CARGO_BIN_EXE_agui-antigravity"));
    command
        .arg("check-config")
        .current_dir(dir)
        .env_clear()
        .env("AGUI_DATA_DIR", dir)
        .env("HOME", dir);
    let (mut top, mut agent, mut agents) = (String::new(), String::new(), String::new());
    for (key, value, via) in setting {
        match via {
            Via::Toml if key.key == "path" => {
                agents.push_str(&format!("[[agents]]\npath = {value}\n"))
            }
            Via::Toml if server_keys().contains(key.key.as_str()) => {
                top.push_str(&format!("{} = {value}\n", key.key));
            }
            Via::Toml => agent.push_str(&format!("{} = {value}\n", key.key)),
            Via::Flag => {
                let flag = key.flag.as_deref().expect("a documented flag");
                if takes_no_value(flag) {
                    command.arg(flag);
                } else {
                    command.arg(format!("{flag}={value}"));
                }
            }
            Via::Env => {
                command.env(key.env.as_deref().expect("a documented variable"), value);
            }
        }
    }
    let file = dir.join("config.toml");
    std::fs::write(&file, format!("{top}[agent]\n{agent}{agents}")).expect("a config file");
    command.arg("--config").arg(file);
    command.output().expect("the binary runs")
}

/// Whether `flag` is a switch (`--demo`) rather than an option with a value.
fn takes_no_value(flag: &str) -> bool {
    let command = Cli::command();
    let serve = command.find_subcommand("serve").expect("serve");
    !serve
        .get_arguments()
        .find(|a| a.get_long() == Some(flag.trim_start_matches("--")))
        .unwrap_or_else(|| panic!("{flag} exists"))
        .get_action()
        .takes_values()
}

#[test]
fn every_documented_key_is_accepted_where_documented() {
    let dir = tempfile::tempdir().unwrap();
    let keys = documented_keys();
    let baseline = check_config(dir.path(), &[]);
    assert!(baseline.status.success(), "{baseline:?}");
    let by_name = |name: &str| keys.iter().find(|k| k.key == name).expect("documented");
    for key in &keys {
        let (toml, cli, also) = sample(&key.key);
        let mut vias = vec![Via::Toml];
        if key.flag.is_some() {
            vias.push(Via::Flag);
        }
        if key.env.is_some() {
            vias.push(Via::Env);
        }
        for via in vias {
            let value = if via == Via::Toml { toml } else { cli };
            let mut setting = vec![(key, value, via)];
            // A key that needs another gets it in TOML, or by flag.
            if let Some(other) = also.map(by_name) {
                let (other_toml, other_cli, _) = sample(&other.key);
                setting.push(match via {
                    Via::Toml => (other, other_toml, Via::Toml),
                    _ => (other, other_cli, Via::Flag),
                });
            }
            let out = check_config(dir.path(), &setting);
            assert!(
                out.status.success(),
                "`{}` by {via:?} is refused: {}",
                key.key,
                String::from_utf8_lossy(&out.stderr)
            );
            assert_ne!(
                out.stdout, baseline.stdout,
                "`{}` by {via:?} changes nothing in the configuration",
                key.key
            );
        }
    }
}

#[test]
fn every_bad_value_of_an_enum_like_key_is_refused_naming_key_value_and_choices() {
    let dir = tempfile::tempdir().unwrap();
    let keys = documented_keys();
    let command = Cli::command();
    let serve = command.find_subcommand("serve").expect("serve");
    let mut checked = BTreeSet::new();
    for arg in serve.get_arguments() {
        let valid: Vec<String> = arg
            .get_possible_values()
            .iter()
            .filter(|v| !v.is_hide_set())
            .map(|v| v.get_name().to_owned())
            .collect();
        if valid.is_empty() || valid == ["true", "false"] {
            continue;
        }
        let name = arg.get_id().as_str();
        let key = keys
            .iter()
            .find(|k| k.key == name)
            .unwrap_or_else(|| panic!("`{name}` is documented"));
        checked.insert(name.to_owned());
        let first = &valid[0];
        let bad = [
            "bogus".to_owned(),
            first.to_uppercase(),
            first[..first.len() - 1].to_owned(),
        ];
        for value in &bad {
            let list = name == "builtin_tools";
            let toml = if list {
                format!("[\"{value}\"]")
            } else {
                format!("\"{value}\"")
            };
            let mut tries = vec![(
                Via::Toml,
                check_config(dir.path(), &[(key, &toml, Via::Toml)]),
            )];
            for (via, documented) in [(Via::Flag, &key.flag), (Via::Env, &key.env)] {
                if documented.is_some() {
                    tries.push((via, check_config(dir.path(), &[(key, value, via)])));
                }
            }
            for (how, out) in tries {
                let error = String::from_utf8_lossy(&out.stderr);
                assert!(
                    !out.status.success(),
                    "`{name}` = `{value}` by {how:?} is accepted"
                );
                let words = name.split('_').collect::<Vec<_>>();
                assert!(
                    error.contains(name) || error.contains(&format!("--{}", words.join("-"))),
                    "the error names the key `{name}`: {error}"
                );
                assert!(
                    error.contains(value.as_str()),
                    "the error names `{value}`: {error}"
                );
                for choice in &valid {
                    assert!(
                        error.contains(choice.as_str()),
                        "the error lists `{choice}`: {error}"
                    );
                }
            }
        }
    }
    assert_eq!(
        checked,
        [
            "behavior",
            "builtin_tools",
            "interrupt_reasons",
            "log_format",
            "on_disconnect",
            "sandbox",
            "structured_output",
            "subagent_events",
            "system_instructions_mode",
            "thinking_level",
        ]
        .map(String::from)
        .into(),
        "the enum-like keys"
    );
}

#[test]
fn the_documented_defaults_are_the_code_defaults() {
    let documented: Vec<(String, String)> = documented_keys()
        .into_iter()
        .map(|k| (k.key, k.default))
        .collect();
    let code: Vec<(String, String)> = agui_server::internals::documented()
        .into_iter()
        .map(|(k, d)| (k.to_owned(), d))
        .collect();
    pretty_assertions::assert_eq!(documented, code);
}

#[test]
fn every_key_the_code_reads_is_documented_and_help_shows_defaults() {
    let documented: BTreeSet<String> = documented_keys().into_iter().map(|k| k.key).collect();
    let code: BTreeSet<String> = server_keys()
        .into_iter()
        .chain(field_names::<AgentSettings>())
        .map(str::to_owned)
        .collect();
    assert_eq!(documented, code);
    let mut command = Cli::command();
    let help = command
        .find_subcommand_mut("serve")
        .expect("serve")
        .render_help()
        .to_string();
    assert!(help.contains("[default: 30]"), "{help}");
    assert!(help.contains("[default: autonomous]"), "{help}");
}

/// The field names serde reads for `T`, as its derived `Deserialize` declares them.
fn field_names<T: serde::de::DeserializeOwned>() -> Vec<&'static str> {
    let mut names = Vec::new();
    let _ = T::deserialize(FieldNames(&mut names));
    names
}

/// A deserializer that only records the field list a struct asks for.
struct FieldNames<'a>(&'a mut Vec<&'static str>);

impl<'de> serde::Deserializer<'de> for FieldNames<'_> {
    type Error = serde::de::value::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
        Err(serde::de::Error::custom("not a struct"))
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Self::Error> {
        self.0.extend(fields);
        Err(serde::de::Error::custom("fields recorded"))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

/// Unconfined agents serving several users or the network are refused unless the operator
/// says every caller is trusted; `strict` is still read, as `thread`.
#[test]
fn unconfined_agents_with_identities_or_a_public_bind_need_insecure_unconfined() {
    use agui_server::ServerConfig;
    let with = |extra: &[&str]| {
        let mut args = vec!["agui-antigravity", "--sandbox", "off"];
        args.extend_from_slice(extra);
        ServerConfig::from_args(args)
    };
    let refused = with(&["--auth-tokens", "alice=alice-token-0123456"])
        .unwrap_err()
        .to_string();
    assert!(refused.contains("insecure_unconfined"), "{refused}");
    let refused = with(&[
        "--bind",
        "0.0.0.0:8027",
        "--auth-token",
        "token-0123456789ab",
    ])
    .unwrap_err()
    .to_string();
    assert!(refused.contains("beyond loopback"), "{refused}");
    assert!(
        with(&[]).is_ok(),
        "alone on loopback, off is the operator's choice"
    );
    assert!(
        with(&[
            "--auth-tokens",
            "alice=alice-token-0123456",
            "--insecure-unconfined"
        ])
        .is_ok()
    );
    let strict = ServerConfig::from_args(["agui-antigravity", "--sandbox", "strict"]).unwrap();
    assert_eq!(
        strict.agents[0].sandbox,
        Some(agui_server::SandboxMode::Thread)
    );
}

/// A configuration error says which part of the configuration failed as a kind a caller can
/// match on (a setup screen, a supervisor that must not restart in a loop); its prose is only
/// for people.
#[test]
fn configuration_errors_say_which_part_failed_as_a_kind() {
    use agui_server::{ConfigProblem, ServerConfig, ServerError};
    let dir = tempfile::tempdir().unwrap();
    let unreadable = dir.path().join("missing.toml");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "this is = = not toml").unwrap();
    let empty_key = dir.path().join("empty-key");
    std::fs::write(&empty_key, "").unwrap();
    let path = |p: &std::path::Path| p.to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, ConfigProblem)> = vec![
        (vec!["--no-such-flag".into()], ConfigProblem::Arguments),
        (
            vec!["--config".into(), path(&unreadable)],
            ConfigProblem::File,
        ),
        (vec!["--config".into(), path(&broken)], ConfigProblem::File),
        (
            vec!["--auth-token".into(), "short".into()],
            ConfigProblem::Access,
        ),
        (
            vec!["--api-key-file".into(), path(&empty_key)],
            ConfigProblem::Secret,
        ),
        (
            vec![
                "--sandbox".into(),
                "off".into(),
                "--auth-tokens".into(),
                "alice=alice-token-0123456".into(),
            ],
            ConfigProblem::Confinement,
        ),
        (
            vec!["--replica-id".into(), "no spaces allowed".into()],
            ConfigProblem::Server,
        ),
    ];
    for (extra, kind) in cases {
        let mut args = vec!["agui-antigravity".to_owned()];
        args.extend(extra.iter().cloned());
        match ServerConfig::from_args(args) {
            Err(ServerError::Config { kind: got, message }) => {
                assert_eq!(got, kind, "{extra:?}: {message}");
                assert!(!message.is_empty());
            }
            other => panic!("{extra:?}: expected a {kind:?} configuration error, got {other:?}"),
        }
    }
}

/// An embedder whose `main` neither calls `launcher_if_asked` nor gives a launcher would lose
/// confinement (and with it the agent's commands and write tools): the server refuses to start,
/// and the error names the one-line fix.
#[tokio::test]
async fn an_embedding_that_cannot_launch_sandboxes_refuses_to_start_naming_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("save").to_string_lossy().into_owned();
    let work = dir.path().join("w").to_string_lossy().into_owned();
    for mode in ["owner", "thread"] {
        let config = agui_server::ServerConfig::from_args([
            "agui-antigravity",
            "--bind",
            "127.0.0.1:0",
            "--save-dir",
            &save,
            "--workspace-root",
            &work,
            "--sandbox",
            mode,
        ])
        .unwrap();
        let Err(error) = agui_server::Server::new(config).start().await else {
            panic!("a server that cannot confine started in mode {mode}");
        };
        assert!(
            matches!(
                error,
                agui_server::ServerError::Config {
                    kind: agui_server::ConfigProblem::NoSandboxLauncher,
                    ..
                }
            ),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains(&format!("sandbox = \"{mode}\""))
                && text.contains("agui_server::sandbox::launcher_if_asked()")
                && text.contains("Server::with_sandbox_launcher"),
            "{text}"
        );
    }
}

/// Every switch of the server's own keys can be turned off by a layer above the one that turned
/// it on: a flag with a value over the file, the environment over the file, a flag over the
/// environment.
#[test]
fn a_switch_turned_on_below_can_be_turned_off_above() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("on.toml");
    std::fs::write(
        &file,
        "demo = true\ninsecure_no_auth = true\ninsecure_unconfined = true\n",
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let merged = |args: &[&str]| {
        let mut all = vec!["agui-antigravity", "--config", &file];
        all.extend_from_slice(args);
        let config = agui_server::ServerConfig::from_args(all).unwrap();
        (
            config.demo,
            config.insecure_no_auth,
            config.insecure_unconfined,
        )
    };
    assert_eq!(merged(&[]), (true, true, true), "the file turns them on");
    assert_eq!(
        merged(&[
            "--demo=false",
            "--insecure-no-auth=false",
            "--insecure-unconfined=false"
        ]),
        (false, false, false)
    );
    assert_eq!(merged(&["--demo"]), (true, true, true), "a bare flag is on");
    // The environment, through the binary (this process's environment is shared by tests).
    let output = Command::new(env!("CARGO_BIN_EXE_agui-antigravity"))
        .args(["check-config", "--config", &file, "--insecure-no-auth=true"])
        .env("AGUI_DEMO", "false")
        .env("AGUI_INSECURE_UNCONFINED", "false")
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for expected in [
        "demo: false",
        "insecure_unconfined: false",
        "insecure_no_auth: true",
    ] {
        assert!(printed.contains(expected), "{expected} in {printed}");
    }
}

/// A workspace template must be a directory that exists: anything else is refused at start,
/// naming the key (a missing template would leave every new thread without its files).
#[test]
fn a_workspace_template_that_is_not_a_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key {
        key: "workspace_template".into(),
        flag: Some("--workspace-template".into()),
        env: Some("AGUI_WORKSPACE_TEMPLATE".into()),
        default: "none".into(),
    };
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let missing = dir.path().join("missing").display().to_string();
    let file = file.display().to_string();
    for (value, why) in [(&missing, "No such file"), (&file, "is not a directory")] {
        let out = check_config(dir.path(), &[(&key, value, Via::Flag)]);
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{value} was accepted");
        assert!(
            text.contains("workspace_template") && text.contains(why),
            "{value}: {text}"
        );
    }
    let template = dir.path().join("template");
    std::fs::create_dir(&template).unwrap();
    let out = check_config(
        dir.path(),
        &[(&key, &template.display().to_string(), Via::Flag)],
    );
    assert!(out.status.success(), "{out:?}");
}

/// No spare at all is `prestart_harness = false`: a maximum of 0 is refused at start, naming
/// the key and that setting, by each way of giving it.
#[test]
fn a_maximum_of_zero_spares_is_refused_naming_the_setting_that_boots_none() {
    let dir = tempfile::tempdir().unwrap();
    let key = Key {
        key: "max_spare_harnesses".into(),
        flag: Some("--max-spare-harnesses".into()),
        env: Some("AGUI_MAX_SPARE_HARNESSES".into()),
        default: "1".into(),
    };
    for via in [Via::Flag, Via::Env, Via::Toml] {
        let out = check_config(dir.path(), &[(&key, "0", via)]);
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "0 was accepted by {via:?}");
        assert!(
            text.contains("max_spare_harnesses must be at least 1")
                && text.contains("prestart_harness = false"),
            "{via:?}: {text}"
        );
    }
    let out = check_config(dir.path(), &[(&key, "4", Via::Flag)]);
    assert!(out.status.success(), "{out:?}");
}
