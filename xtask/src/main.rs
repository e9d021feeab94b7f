//! `cargo xtask`: project automation (fetching the harness, protobuf import and codegen, the
//! playground build, the test suites).

mod bench;
mod bench_baseline;
mod browser;
mod check_architecture;
mod client;
mod codegen;
mod copilotkit;
mod e2e;
mod fetch_harness;
mod import_captures;
mod import_protos;
mod live_gate;
mod playground;
mod recipes;
mod record;
mod soak;
mod system_packages;
mod test;
mod util;
mod validate;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "agui-antigravity project automation")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Download the google-antigravity wheel, verify and install `localharness`, print its path.
    FetchHarness(fetch_harness::Args),
    /// Convert the protobuf descriptors embedded in the wheel into readable proto3 files in `proto/`.
    ImportProtos(import_protos::Args),
    /// Generate the committed Rust code for `proto/` (no system protoc needed).
    Codegen(codegen::Args),
    /// Record the real harness's frames for scripted scenarios into `fixtures/steps/`.
    Record(record::Args),
    /// Run the whole test suite, installing the harness and the Node test packages first.
    Test(test::Args),
    /// Check the deployment recipes (`deploy/`): the manifest against Kubernetes' schema, the
    /// confinement settings in runc containers, the compose configuration behind nginx.
    Recipes(recipes::Args),
    /// Run the benchmark of record (no name: W1-W4 against the release server next to the raw
    /// harness floor, tables and JSON) or a named benchmark (`translate`).
    Bench(bench::Args),
    /// Soak the release server for N minutes: simulated users, injected faults (killed and
    /// stalled harnesses, killed launchers, server restarts), invariants checked throughout.
    Soak(soak::Args),
    /// Check the crate layering and dependency invariants of ARCHITECTURE.md.
    CheckArchitecture(check_architecture::Args),
    /// Copy the host <-> harness frames of reference captures into `fixtures/harness-frames/`.
    ImportCaptures(import_captures::Args),
    /// Run the end-to-end suite (`tests/e2e`): the real binary, harness and scripted model
    /// driven by the official AG-UI client.
    E2e(e2e::Args),
    /// The end-to-end suite plus the parking gate, against Gemini when `GEMINI_API_KEY` is set.
    LiveGate(live_gate::Args),
    /// Build the playground page into the committed `crates/agui-server/playground/dist/`.
    Playground(playground::Args),
    /// Run the browser suite (`tests/browser`): the playground in headless Chromium against the
    /// real binary, harness and scripted model.
    Browser(browser::Args),
    /// Run the TypeScript client package's tests (`clients/typescript`) against the real binary,
    /// harness and scripted model.
    Client(client::Args),
    /// Build the CopilotKit example app (`examples/copilotkit`) and run its browser tests against
    /// the real binary, harness and scripted model.
    Copilotkit(copilotkit::Args),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().task {
        Task::FetchHarness(args) => fetch_harness::run(args),
        Task::ImportProtos(args) => import_protos::run(args),
        Task::Codegen(args) => codegen::run(args),
        Task::ImportCaptures(args) => import_captures::run(args),
        Task::CheckArchitecture(args) => check_architecture::run(args),
        Task::Bench(args) => bench::run(args),
        Task::Soak(args) => soak::run(args),
        Task::Test(args) => test::run(args),
        Task::Recipes(args) => recipes::run(args),
        Task::Record(args) => record::run(args),
        Task::E2e(args) => e2e::run(args),
        Task::LiveGate(args) => live_gate::run(args),
        Task::Playground(args) => playground::run(args),
        Task::Browser(args) => browser::run(args),
        Task::Client(args) => client::run(args),
        Task::Copilotkit(args) => copilotkit::run(args),
    }
}
