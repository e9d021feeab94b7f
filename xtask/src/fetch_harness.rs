//! `cargo xtask fetch-harness`: install the real `localharness` into the project cache.

use harness_install::{Cache, DEFAULT_VERSION, Installer};

/// Arguments of `fetch-harness`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The google-antigravity version to install.
    #[arg(long, default_value = DEFAULT_VERSION)]
    version: String,
    /// Re-hash an already installed binary against the wheel (slower; repairs a corrupted install).
    #[arg(long)]
    verify: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let installer = Installer::new(Cache::from_env()?, args.version);
    let path = if args.verify {
        installer.verify_or_reinstall()?
    } else {
        installer.install()?
    };
    println!("{}", path.display());
    Ok(())
}
