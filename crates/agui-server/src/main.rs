//! The `agui-antigravity` binary.

fn main() -> std::process::ExitCode {
    eprintln!(
        "agui-antigravity: the server is not built yet (see the agui-server issue). \
         `cargo xtask fetch-harness` already installs the harness it will run."
    );
    std::process::ExitCode::FAILURE
}
