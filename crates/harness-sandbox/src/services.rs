//! The network services a host serves inside each sandbox ([`NetworkServices`]), apart from
//! the confinement that names them and the channel that hands them their listeners, which both
//! depend on them.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::Result;

/// Who a confined process serves, for the host's logs and metrics (an owner's label, a
/// thread's): given to the [`NetworkServices`] with each of its listeners.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProcessLabel(pub String);

impl std::fmt::Display for ProcessLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a service granted a new sandbox: the token its requests must carry, and whatever keeps
/// the service up for it, dropped (revoked) when the sandbox's launcher exits.
pub struct ServiceGrant {
    /// The token the harness presents (as its model API key and the first segment of the model
    /// base URL's path); `None`: requests pass as they are.
    pub token: Option<String>,
    /// Revokes the grant when dropped.
    pub guard: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for ServiceGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceGrant")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

/// The services a host serves inside each sandbox, on listeners the launcher opened there (on
/// the sandbox's own loopback: nothing outside it can reach them, and a command inside cannot
/// reach the model's).
pub trait NetworkServices: Send + Sync + 'static {
    /// Serve the harness's model calls arriving on `listener` (at `127.0.0.1:`[`crate::MODEL_PORT`]
    /// inside the sandbox of `process`).
    fn model(
        &self,
        listener: std::net::TcpListener,
        process: &ProcessLabel,
    ) -> Result<ServiceGrant, String>;

    /// Serve the egress proxy (at `127.0.0.1:`[`crate::EGRESS_PORT`] inside; the sandbox's
    /// `HTTP_PROXY` and `HTTPS_PROXY`). Refusing every request is a valid service.
    fn egress(
        &self,
        listener: std::net::TcpListener,
        process: &ProcessLabel,
    ) -> Result<ServiceGrant, String>;
}

/// A host's [`NetworkServices`], compared by identity (one value per host, shared by every
/// confinement it builds), so that a [`Confinement`](crate::Confinement) stays comparable.
#[derive(Clone)]
pub struct Services(pub Arc<dyn NetworkServices>);

impl Services {
    /// Services that forward every model connection to `model` (an address on the host), as
    /// they are, and refuse egress: for hosts whose model endpoint needs no credentials kept
    /// from the harness.
    pub fn forward_model_to(model: SocketAddr) -> Self {
        Self(Arc::new(Forward { model }))
    }
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Services(..)")
    }
}

impl PartialEq for Services {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Services {}

impl std::hash::Hash for Services {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.0).cast::<()>(), state);
    }
}

/// [`Services::forward_model_to`].
struct Forward {
    model: SocketAddr,
}

impl NetworkServices for Forward {
    fn model(
        &self,
        listener: std::net::TcpListener,
        _process: &ProcessLabel,
    ) -> Result<ServiceGrant, String> {
        let listener = into_tokio(listener)?;
        let model = self.model;
        let task = tokio::spawn(async move {
            while let Ok((mut inside, _)) = listener.accept().await {
                tokio::spawn(async move {
                    if let Ok(mut outside) = tokio::net::TcpStream::connect(model).await {
                        let _ = tokio::io::copy_bidirectional(&mut inside, &mut outside).await;
                    }
                });
            }
        });
        Ok(ServiceGrant {
            token: None,
            guard: Box::new(AbortOnDrop(task)),
        })
    }

    fn egress(
        &self,
        listener: std::net::TcpListener,
        _process: &ProcessLabel,
    ) -> Result<ServiceGrant, String> {
        // Held open and never accepted: connections wait, then time out in the client.
        Ok(ServiceGrant {
            token: None,
            guard: Box::new(listener),
        })
    }
}

/// A listener handed over by the launcher, as tokio's.
pub(crate) fn into_tokio(
    listener: std::net::TcpListener,
) -> Result<tokio::net::TcpListener, String> {
    listener
        .set_nonblocking(true)
        .and_then(|()| tokio::net::TcpListener::from_std(listener))
        .map_err(|e| format!("cannot serve the sandbox's listener: {e}"))
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
