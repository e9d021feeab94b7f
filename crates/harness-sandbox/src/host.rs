//! The host's end of a launcher's control channel (see `control`): the harness's stdio, the
//! services' listeners handed to [`NetworkServices`], sockets connected inside the sandbox, and
//! what its PID 1 does for the host among its processes (stopping the commands, measuring the
//! files they hold unlinked).

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use tokio::io::Interest;
use tokio::io::{AsyncWriteExt as _, DuplexStream};
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tracing::Instrument as _;

use crate::control::{self, FromLauncher, STDIO_CHUNK, Service, ToLauncher};
use crate::services::{ProcessLabel, ServiceGrant, Services};
use crate::{Result, SandboxError};

/// How much of the harness's stdout may wait for the host to read it.
const STDOUT_BUFFER: usize = 64 * 1024;

/// The host's end of a launcher's control channel, before the launcher runs.
#[derive(Debug)]
pub(crate) struct HostChannel {
    socket: OwnedFd,
}

impl HostChannel {
    pub(crate) fn new(socket: OwnedFd) -> Result<Self> {
        Ok(Self { socket })
    }

    /// Starts serving the channel of the launcher just spawned (inside a tokio runtime): its
    /// listeners go to `services` (for `label`), its harness's stdout to
    /// [`StartedSandbox::stdout`]. The grants the services give stay alive until the launcher
    /// exits (its end of the channel closes), then are dropped.
    pub(crate) fn start(
        self,
        services: Option<Services>,
        label: ProcessLabel,
    ) -> Result<StartedSandbox> {
        // A sequenced-packet socket, driven only through readiness and `try_io` (never read or
        // written as a stream): tokio's Unix stream type serves for the readiness.
        let socket = std::os::unix::net::UnixStream::from(self.socket);
        socket
            .set_nonblocking(true)
            .map_err(SandboxError::io("make the control channel non-blocking"))?;
        let socket = UnixStream::from_std(socket)
            .map_err(SandboxError::io("watch the launcher's control channel"))?;
        let shared = Arc::new(Shared {
            socket,
            send: tokio::sync::Mutex::new(()),
            state: Mutex::new(State::default()),
        });
        let (stdout_writer, stdout) = tokio::io::duplex(STDOUT_BUFFER);
        tokio::spawn(
            read_reports(shared.clone(), services, label, stdout_writer).in_current_span(),
        );
        let control = SandboxControl { shared };
        Ok(StartedSandbox {
            stdin: SandboxStdin {
                control: control.clone(),
                closed: false,
            },
            stdout: SandboxStdout(stdout),
            control,
        })
    }
}

/// A running launcher's channel, split by use.
#[derive(Debug)]
pub(crate) struct StartedSandbox {
    /// The harness's stdin.
    pub stdin: SandboxStdin,
    /// The harness's stdout.
    pub stdout: SandboxStdout,
    /// Connections into the sandbox, and what its services granted.
    pub control: SandboxControl,
}

/// The harness's stdin, through the launcher. Closing it (or dropping it) closes the harness's
/// stdin, its signal to shut down.
#[derive(Debug)]
pub struct SandboxStdin {
    control: SandboxControl,
    closed: bool,
}

impl SandboxStdin {
    /// Writes all of `data` to the harness's stdin.
    pub async fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        for chunk in data.chunks(STDIO_CHUNK) {
            self.control
                .send(&ToLauncher::Stdin(chunk.to_vec()), |_| ())
                .await?;
        }
        Ok(())
    }

    /// Closes the harness's stdin.
    pub async fn close(mut self) {
        self.closed = true;
        let _ = self.control.send(&ToLauncher::CloseStdin, |_| ()).await;
    }
}

impl Drop for SandboxStdin {
    fn drop(&mut self) {
        if !self.closed {
            // Best effort without waiting: a full channel means the launcher is stuck anyway,
            // and its end closing (the process exiting) closes the harness's stdin too.
            let packet = ToLauncher::CloseStdin.encode();
            let _ = control::send(self.control.shared.socket.as_raw_fd(), &packet, None);
        }
    }
}

/// The harness's stdout, through the launcher.
#[derive(Debug)]
pub struct SandboxStdout(DuplexStream);

impl tokio::io::AsyncRead for SandboxStdout {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

/// Connections into a running sandbox, and what its services granted. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SandboxControl {
    shared: Arc<Shared>,
}

struct Shared {
    socket: UnixStream,
    /// Held while a request is sent and, for a connect, queued: replies come in request order.
    send: tokio::sync::Mutex<()>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    connects: VecDeque<oneshot::Sender<io::Result<std::net::TcpStream>>>,
    /// Pending `stop_commands`, answered in request order.
    stops: VecDeque<oneshot::Sender<u32>>,
    /// Pending `unlinked_bytes`, answered in request order.
    unlinked: VecDeque<oneshot::Sender<u64>>,
    /// Pending `running_commands`, answered in request order.
    counts: VecDeque<oneshot::Sender<u32>>,
    model_token: Option<String>,
    grants: Vec<ServiceGrant>,
    harness_pid: Option<u32>,
    failure: Option<String>,
    ended: bool,
}

impl SandboxControl {
    /// A TCP connection to `port` on the sandbox's loopback (where the harness listens),
    /// connected by the launcher inside.
    pub async fn connect(&self, port: u16) -> io::Result<tokio::net::TcpStream> {
        let (reply, socket) = oneshot::channel();
        let mut reply = Some(reply);
        self.send(&ToLauncher::Connect(port), |state| {
            if let Some(reply) = reply.take() {
                state.connects.push_back(reply);
            }
        })
        .await?;
        let stream = socket
            .await
            .map_err(|_| ended("the sandbox ended before it connected"))??;
        stream.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(stream)
    }

    /// Kills (`SIGKILL`) every process of the sandbox but its PID 1 and the harness — the
    /// commands the harness started and whatever they left running — and returns how many were
    /// killed. The harness goes on (a command it waits for ends as killed).
    pub async fn stop_commands(&self) -> io::Result<u32> {
        self.ask(
            &ToLauncher::StopCommands,
            |state| &mut state.stops,
            "the sandbox ended before it stopped its commands",
        )
        .await
    }

    /// The bytes of disk (allocated blocks) held by regular files that the sandbox's processes
    /// keep open after they were unlinked — invisible to a walk of its directories — on the
    /// file systems of the directories it may write (not its `/tmp`, which is memory and has its
    /// own size, nor memfds). Each file counts once, however many descriptors hold it.
    pub async fn unlinked_bytes(&self) -> io::Result<u64> {
        self.ask(
            &ToLauncher::UnlinkedBytes,
            |state| &mut state.unlinked,
            "the sandbox ended before it measured its unlinked files",
        )
        .await
    }

    /// How many processes of the sandbox run besides its PID 1 and the harness: the commands
    /// the harness started (a command left running in the background among them) and whatever
    /// they left running. An ended sandbox answers with an error.
    pub async fn running_commands(&self) -> io::Result<u32> {
        self.ask(
            &ToLauncher::CountCommands,
            |state| &mut state.counts,
            "the sandbox ended before it counted its commands",
        )
        .await
    }

    /// The token the model service granted (the harness's model key inside), once its listener
    /// arrived.
    pub fn model_token(&self) -> Option<String> {
        self.lock().model_token.clone()
    }

    /// The harness's pid inside the sandbox, once it started.
    pub fn harness_pid(&self) -> Option<u32> {
        self.lock().harness_pid
    }

    /// Why the sandbox could not be completed, if the launcher said so.
    pub fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        self.shared.state.lock()
    }

    /// Sends a request; `queue` runs under the send lock, right before it, with the state.
    /// Sends `request` and waits for its answer, which the reader hands to the oldest sender
    /// in the queue `pending` picks (`ended_before`: the error when the sandbox ends first).
    async fn ask<T>(
        &self,
        request: &ToLauncher,
        pending: fn(&mut State) -> &mut VecDeque<oneshot::Sender<T>>,
        ended_before: &str,
    ) -> io::Result<T> {
        let (reply, answer) = oneshot::channel();
        let mut reply = Some(reply);
        self.send(request, |state| {
            if let Some(reply) = reply.take() {
                pending(state).push_back(reply);
            }
        })
        .await?;
        answer.await.map_err(|_| ended(ended_before))
    }

    async fn send(&self, request: &ToLauncher, queue: impl FnOnce(&mut State)) -> io::Result<()> {
        let _order = self.shared.send.lock().await;
        if self.lock().ended {
            return Err(ended("the sandbox has ended"));
        }
        queue(&mut self.lock());
        let packet = request.encode();
        let socket = &self.shared.socket;
        loop {
            socket.writable().await?;
            match socket.try_io(Interest::WRITABLE, || {
                control::send(socket.as_raw_fd(), &packet, None).map_err(io::Error::from)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => return result,
            }
        }
    }
}

fn ended(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, what.to_owned())
}

/// Reads the launcher's reports until its end closes.
async fn read_reports(
    shared: Arc<Shared>,
    services: Option<Services>,
    label: ProcessLabel,
    mut stdout: DuplexStream,
) {
    loop {
        let socket = &shared.socket;
        let received = loop {
            if let Err(e) = socket.readable().await {
                break Err(e);
            }
            match socket.try_io(Interest::READABLE, || {
                control::receive(socket.as_raw_fd()).map_err(io::Error::from)
            }) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                result => break result,
            }
        };
        let (packet, mut fds) = match received {
            Ok(Some(message)) => message,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(sandbox = %label, error = %e, "reading the sandbox launcher's channel failed");
                break;
            }
        };
        let report = match FromLauncher::decode(&packet) {
            Ok(report) => report,
            Err(e) => {
                tracing::warn!(sandbox = %label, error = %e, "the sandbox launcher sent a malformed report");
                continue;
            }
        };
        let fd = if report.carries_fd() { fds.pop() } else { None };
        match report {
            FromLauncher::Stdout(data) => {
                // The reader may be gone (the handshake is over); the harness writes nothing
                // more that matters.
                let _ = stdout.write_all(&data).await;
            }
            FromLauncher::Listener(service) => {
                let Some(fd) = fd else {
                    tracing::warn!(sandbox = %label, service = service.name(), "a listener report came without its socket");
                    continue;
                };
                serve(&shared, services.as_ref(), &label, service, fd);
            }
            FromLauncher::Connected => {
                let reply = shared_state(&shared).connects.pop_front();
                if let Some(reply) = reply {
                    let _ = reply.send(match fd {
                        Some(fd) => Ok(std::net::TcpStream::from(fd)),
                        None => Err(io::Error::other("the launcher sent no socket")),
                    });
                }
            }
            FromLauncher::ConnectFailed(why) => {
                let reply = shared_state(&shared).connects.pop_front();
                if let Some(reply) = reply {
                    let _ = reply.send(Err(io::Error::new(io::ErrorKind::ConnectionRefused, why)));
                }
            }
            FromLauncher::Started(pid) => shared_state(&shared).harness_pid = Some(pid),
            FromLauncher::Stopped(count) => {
                if let Some(reply) = shared_state(&shared).stops.pop_front() {
                    let _ = reply.send(count);
                }
            }
            FromLauncher::Unlinked(bytes) => {
                if let Some(reply) = shared_state(&shared).unlinked.pop_front() {
                    let _ = reply.send(bytes);
                }
            }
            FromLauncher::Commands(count) => {
                if let Some(reply) = shared_state(&shared).counts.pop_front() {
                    let _ = reply.send(count);
                }
            }
            FromLauncher::Failed(why) => {
                tracing::warn!(sandbox = %label, reason = %why, "the sandbox could not be completed");
                shared_state(&shared).failure = Some(why);
            }
        }
    }
    // The launcher is gone: its services' grants go with it (revoked), and nothing pending
    // will be answered.
    let (grants, connects) = {
        let mut state = shared_state(&shared);
        state.ended = true;
        // Their requesters see the end (the senders dropped).
        state.stops.clear();
        state.unlinked.clear();
        state.counts.clear();
        (
            std::mem::take(&mut state.grants),
            std::mem::take(&mut state.connects),
        )
    };
    drop(grants);
    for reply in connects {
        let _ = reply.send(Err(ended("the sandbox ended before it connected")));
    }
}

fn shared_state(shared: &Shared) -> parking_lot::MutexGuard<'_, State> {
    shared.state.lock()
}

/// Hands a service's listener to the host's services, keeping the grant.
fn serve(
    shared: &Shared,
    services: Option<&Services>,
    label: &ProcessLabel,
    service: Service,
    fd: OwnedFd,
) {
    let listener = std::net::TcpListener::from(fd);
    let granted = match services {
        Some(services) => match service {
            Service::Model => services.0.model(listener, label),
            Service::Egress => services.0.egress(listener, label),
        },
        None => Err("this host serves no network services".into()),
    };
    let mut state = shared_state(shared);
    match granted {
        Ok(grant) => {
            if service == Service::Model {
                state.model_token = grant.token.clone();
            }
            state.grants.push(grant);
        }
        Err(why) => {
            tracing::warn!(sandbox = %label, service = service.name(), reason = %why, "a sandbox service could not start");
            state.failure = Some(
                SandboxError::Service {
                    service: service.name(),
                    reason: why,
                }
                .to_string(),
            );
        }
    }
}
