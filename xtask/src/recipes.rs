//! `cargo xtask recipes`: the deployment recipes in `deploy/` deploy what the tests test.
//!
//! 1. `deploy/kubernetes/agui.yaml` validates against Kubernetes' schema, strictly (no unknown
//!    field), with `kubernetes-validate` (PyPI) for Kubernetes [`KUBERNETES_VERSION`].
//! 2. The confinement settings of the recipes, measured in runc containers (`container.rs`).
//! 3. `deploy/compose.yaml`'s configuration, started without containers behind the real nginx:
//!    two users behind it are two owners (`compose.rs`).
//!
//! `cargo xtask test` runs it after the Rust tests. The Python package goes into
//! `<target dir>/kubernetes-validate-<version>` (`pip install --target`, like the stream
//! validator); nginx and runc are Debian packages (`system_packages.rs`).

mod compose;
mod container;
mod http;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util::{install_harness, run_checked, target_dir, workspace_root};

/// The Kubernetes version the manifest is validated against (the newest the package knows).
pub(crate) const KUBERNETES_VERSION: &str = "1.37.0";

/// The pinned `kubernetes-validate` (its schemas go up to [`KUBERNETES_VERSION`]).
const VALIDATE_VERSION: &str = "1.37.0";

/// The manifest.
const MANIFEST: &str = "deploy/kubernetes/agui.yaml";

/// Arguments of `recipes`.
#[derive(clap::Args)]
pub(crate) struct Args {}

pub(crate) fn run(_args: Args) -> anyhow::Result<()> {
    crate::system_packages::ensure()?;
    let harness = install_harness()?;
    let root = workspace_root();
    let python = PythonTools::install()?;
    validate_manifest(&python, &root)?;
    let (agui_bin, _) = crate::e2e::build_binaries(&root, false)?;
    container::check(&agui_bin, &harness)?;
    compose::check(&agui_bin, &harness, &python)?;
    eprintln!("xtask recipes: every check passed");
    Ok(())
}

/// `kubernetes-validate --strict` on the manifest, every resource of which must pass.
fn validate_manifest(python: &PythonTools, root: &Path) -> anyhow::Result<()> {
    eprintln!(
        "xtask recipes: kubernetes-validate {VALIDATE_VERSION} --kubernetes-version {KUBERNETES_VERSION} --strict {MANIFEST}"
    );
    let mut validate = python.command();
    validate
        .args([
            "-m",
            "kubernetes_validate",
            "--kubernetes-version",
            KUBERNETES_VERSION,
            "--strict",
        ])
        .arg(root.join(MANIFEST));
    run_checked(&mut validate, "kubernetes-validate").with_context(|| {
        format!("{MANIFEST} does not validate against Kubernetes {KUBERNETES_VERSION}")
    })
}

/// `python3` with `kubernetes-validate` (and the YAML parser it brings) importable.
pub(crate) struct PythonTools {
    dir: PathBuf,
}

impl PythonTools {
    /// Installs the package if it is missing.
    fn install() -> anyhow::Result<Self> {
        let dir = target_dir().join(format!("kubernetes-validate-{VALIDATE_VERSION}"));
        if !dir.join("kubernetes_validate").is_dir() {
            eprintln!(
                "xtask: installing kubernetes-validate {VALIDATE_VERSION} into {}",
                dir.display()
            );
            let mut pip = Command::new("python3");
            pip.args(["-m", "pip", "install", "--quiet", "--target"])
                .arg(&dir)
                .arg(format!("kubernetes-validate=={VALIDATE_VERSION}"));
            run_checked(&mut pip, "pip install kubernetes-validate")
                .context("installing the manifest validator (needs Python 3 with pip)")?;
        }
        Ok(Self { dir })
    }

    /// `python3` with the package on its path; arguments follow.
    fn command(&self) -> Command {
        let mut python = Command::new("python3");
        python.env("PYTHONPATH", &self.dir);
        python
    }

    /// A YAML file as JSON (PyYAML's safe loader, which merges `<<` keys as compose does).
    pub(crate) fn yaml_to_json(&self, path: &Path) -> anyhow::Result<serde_json::Value> {
        let output = self
            .command()
            .args([
                "-c",
                "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)",
            ])
            .arg(path)
            .output()
            .context("starting python3")?;
        if !output.status.success() {
            bail!(
                "reading {} as YAML failed: {}",
                path.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        serde_json::from_slice(&output.stdout).with_context(|| path.display().to_string())
    }
}

/// A free loopback port (closed again at once: a server binds it next).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port())
}
