//! `cargo xtask bench <name>`: benchmarks that report figures (never asserted in tests).

use anyhow::bail;

use crate::util::{cargo, run_checked, workspace_root};

/// The benchmarks, as (name, package, bench target, what it reports).
const BENCHES: &[(&str, &str, &str, &str)] = &[(
    "translate",
    "agui-translate",
    "translate",
    "steps/second and events/second over the recorded fixtures",
)];

/// Arguments of `bench`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Which benchmark (`translate`).
    name: String,
    /// Extra arguments for the benchmark binary (e.g. a round count).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    extra: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let Some((_, package, target, what)) = BENCHES.iter().find(|(name, ..)| *name == args.name)
    else {
        let known: Vec<&str> = BENCHES.iter().map(|(n, ..)| *n).collect();
        bail!(
            "unknown benchmark `{}`; known: {}",
            args.name,
            known.join(", ")
        );
    };
    eprintln!("xtask bench {}: {what}", args.name);
    run_checked(
        cargo()
            .current_dir(workspace_root())
            .args(["bench", "-p", package, "--bench", target, "--"])
            .args(&args.extra),
        "cargo bench",
    )
}
