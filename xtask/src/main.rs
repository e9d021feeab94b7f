//! `cargo xtask`: project automation.

fn main() -> anyhow::Result<()> {
    anyhow::bail!("no tasks yet")
}
