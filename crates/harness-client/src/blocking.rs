//! Blocking work kept off the async runtime: binary discovery may start `python3`, and walking
//! `/proc` reads a file per process. On a current-thread runtime (the default of
//! `#[tokio::main(flavor = "current_thread")]` and of `#[tokio::test]`) either would stall every
//! other task of the embedder.

/// Runs `job` on the runtime's blocking pool and waits for it without blocking the caller's
/// thread. `None` when the pool refuses it (its runtime is shutting down); a panic in `job`
/// resumes here.
pub(crate) async fn off_runtime<T, F>(job: F) -> Option<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match tokio::task::spawn_blocking(job).await {
        Ok(output) => Some(output),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}
