//! The `agui-antigravity` binary.

use std::process::ExitCode;

use agui_server::cli::{Cli, Command};
use agui_server::{Server, ServerConfig, init_logging};

fn main() -> ExitCode {
    // `agui-antigravity __sandbox-exec …`: this process is a sandbox launcher (before any thread).
    if let Some(code) = agui_server::sandbox::launcher_if_asked() {
        return code;
    }
    return_large_buffers_at_once();
    // What the server writes (thread records, owners, leases, directory trees) is its own.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let args: Vec<String> = std::env::args().collect();
    let cli = match Cli::parse_args(args.clone()) {
        Ok(cli) => cli,
        // Help and version are printed with success; bad input with clap's usage status.
        Err(e) => e.exit(),
    };
    // Parsing read every variable the configuration takes: the secrets among them leave the
    // environment now, before any thread or child process exists.
    scrub_environment(&agui_server::cli::secret_variables());
    let (check_only, serve_args) = match cli.command {
        Command::Serve(args) => (false, args),
        Command::CheckConfig(args) => (true, args),
    };
    let config = match ServerConfig::from_serve_args(&serve_args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agui-antigravity: {e}");
            return ExitCode::from(2);
        }
    };
    init_logging(config.log_format);
    for warning in agui_server::cli::secrets_on_command_line(&args) {
        tracing::warn!("{warning}");
    }
    if check_only {
        println!("{:#?}", config.redacted());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Idle blocking-pool threads are woken in turn, so under a steady trickle of file work
        // none stays idle for tokio's default 10 s: a burst (every lease renewed at once after
        // the process was frozen) would leave its peak of threads for good. A short keep-alive
        // lets the pool shrink back to what the load needs.
        .thread_keep_alive(std::time::Duration::from_secs(1))
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agui-antigravity: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        match Server::new(config).start().await {
            Ok(server) => {
                // One write, so a reader of the log never sees the line without its address.
                let line = format!(
                    "agui-antigravity: serving AG-UI on http://{}\n",
                    server.addr()
                );
                let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
                server.run_until_signal().await;
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!(error = %e, "could not start");
                eprintln!("agui-antigravity: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Makes glibc give large buffers back to the system when they are freed. By default its
/// threshold for a block of its own rises to the largest block freed so far (up to 32 MB): after
/// one large reply (a 12 MB model answer passes through several buffers) every later large
/// buffer comes from the heap arenas, whose freed space is kept, and the server's RSS stayed
/// ~120 MB above its idle level after a single 12 MB reply. A fixed threshold keeps it at its
/// idle level. An operator's `MALLOC_MMAP_THRESHOLD_` wins.
#[allow(unsafe_code)]
fn return_large_buffers_at_once() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        /// Blocks from this size up are mapped on their own, and unmapped when freed.
        const MMAP_THRESHOLD: libc::c_int = 1024 * 1024;
        // SAFETY: `mallopt` only sets a tuning parameter of the C allocator; it runs first in
        // `main`, before any other thread exists, and its result (0 when refused) needs no
        // handling: the default behaviour stays.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

/// Removes the variables `names` from this process's environment, and overwrites their text
/// where the kernel shows it (`/proc/<pid>/environ` reads the block the process started with,
/// which `unsetenv` leaves as it was).
#[allow(unsafe_code)]
fn scrub_environment(names: &[String]) {
    use std::ffi::CStr;

    // SAFETY: this runs at the start of `main`, before the async runtime or anything else has
    // started a thread, so nothing reads or writes the environment meanwhile (the condition of
    // `remove_var`). `environ` is the C runtime's NULL-terminated array of pointers to
    // NUL-terminated `NAME=value` strings; we only read it, then write zeros over the bytes
    // (not the terminator) of entries already unlinked from it, so nothing can reach them any
    // more. Rust holds no reference into those strings: `std::env` copies what it reads.
    unsafe {
        let mut found: Vec<(*mut libc::c_char, usize)> = Vec::new();
        let mut entry = libc::environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            let name = text.split(|b| *b == b'=').next().unwrap_or_default();
            if names.iter().any(|n| n.as_bytes() == name) {
                found.push((*entry, text.len()));
            }
            entry = entry.add(1);
        }
        for name in names {
            std::env::remove_var(name);
        }
        for (text, len) in found {
            std::ptr::write_bytes(text, 0, len);
        }
    }
}
