//! The sandbox's PID 1: network and listeners, then the harness, its stdio relayed over the
//! control channel, connections made for the host, orphans reaped; exits with the harness (the
//! kernel then kills whatever is left in the PID namespace).

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::{
    CONTROL, HARNESS_ARG, Own, PROBE_COMMAND_ARG, SETUP_FAILED, identity, netdev, procs, rules,
};
use crate::control::{self, FromLauncher, STDIO_CHUNK, Service, ToLauncher};
use crate::spec::{EGRESS_PORT, MODEL_PORT, ProbeReport, Spec};

/// Runs the sandbox for `spec` (read from `spec_fd`, which the harness stage gets) until the
/// harness exits; returns its status.
pub(super) fn run(spec: &Spec, spec_fd: OwnedFd) -> Result<u8, String> {
    begin()?;
    netdev::loopback_up().map_err(|e| format!("cannot bring the sandbox's loopback up: {e}"))?;
    // Bound while this process may still bind privileged ports (the model's is one, so no
    // command can take it first).
    let listeners = if spec.services {
        vec![
            (Service::Model, listen(MODEL_PORT)?),
            (Service::Egress, listen(EGRESS_PORT)?),
        ]
    } else {
        Vec::new()
    };
    rules::drop_capabilities()?;
    let control = borrowed(CONTROL);
    for (service, listener) in &listeners {
        report(
            control,
            &FromLauncher::Listener(*service),
            Some(listener.as_fd()),
        )?;
    }
    drop(listeners);
    // SIGCHLD is read from a descriptor, so one poll waits for the host, the harness's output
    // and its exit alike. (Children start with an empty signal mask: std resets it.)
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None)
        .map_err(|e| format!("cannot block SIGCHLD: {e}"))?;
    let children = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| format!("cannot watch the sandbox's children: {e}"))?;
    let own = Own::find(1)?;
    // Inherited by the harness stage alone: this process is single-threaded and starts nothing
    // else until the descriptor is closed.
    fcntl(&spec_fd, FcntlArg::F_SETFD(FdFlag::empty()))
        .map_err(|e| format!("cannot pass the spec on: {e}"))?;
    let mut harness = own
        .command(&[HARNESS_ARG, &spec_fd.as_raw_fd().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("could not start the harness stage: {e}"))?;
    drop(spec_fd);
    let pid = harness.id();
    report(control, &FromLauncher::Started(pid), None)?;
    Relay {
        stdin: harness.stdin.take(),
        stdout: harness.stdout.take(),
        control_open: true,
        harness: pid,
        writable: procs::devices(&spec.read_write),
    }
    .run(&mut harness, &children)
}

/// What PID 1 moves between the host and the harness.
struct Relay {
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    control_open: bool,
    /// The harness's pid.
    harness: u32,
    /// The devices of the directories the sandbox may write (whose unlinked files count).
    writable: Vec<u64>,
}

impl Relay {
    /// Serves until the harness exits; returns its status.
    fn run(mut self, harness: &mut Child, children: &SignalFd) -> Result<u8, String> {
        let harness_pid = Pid::from_raw(i32::try_from(harness.id()).map_err(|e| e.to_string())?);
        let control = borrowed(CONTROL);
        loop {
            let (control_ready, stdout_ready, child_ready) = {
                let mut fds = vec![PollFd::new(children.as_fd(), PollFlags::POLLIN)];
                if self.control_open {
                    fds.push(PollFd::new(control, PollFlags::POLLIN));
                }
                let stdout_at = fds.len();
                if let Some(stdout) = &self.stdout {
                    fds.push(PollFd::new(stdout.as_fd(), PollFlags::POLLIN));
                }
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(format!("poll: {e}")),
                }
                let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
                (
                    self.control_open && ready(&fds[1]),
                    self.stdout.is_some() && ready(&fds[stdout_at]),
                    ready(&fds[0]),
                )
            };
            if child_ready {
                while let Ok(Some(_)) = children.read_signal() {}
                if let Some(code) = reap(harness_pid)? {
                    return Ok(code);
                }
            }
            if stdout_ready {
                self.forward_stdout(control)?;
            }
            if control_ready {
                self.serve_host(control);
            }
        }
    }

    /// Answers the host; a host gone away reads nothing more.
    fn answer(&mut self, control: BorrowedFd<'_>, message: &FromLauncher) {
        if report(control, message, None).is_err() {
            self.control_open = false;
            self.stdin = None;
        }
    }

    fn forward_stdout(&mut self, control: BorrowedFd<'_>) -> Result<(), String> {
        let Some(stdout) = &mut self.stdout else {
            return Ok(());
        };
        let mut buffer = vec![0u8; STDIO_CHUNK];
        match stdout.read(&mut buffer) {
            Ok(0) | Err(_) => self.stdout = None,
            Ok(n) => {
                buffer.truncate(n);
                if self.control_open {
                    // A host gone away reads nothing more; the harness goes on until its stdin
                    // closes.
                    if report(control, &FromLauncher::Stdout(buffer), None).is_err() {
                        self.control_open = false;
                        self.stdin = None;
                    }
                }
            }
        }
        Ok(())
    }

    fn serve_host(&mut self, control: BorrowedFd<'_>) {
        let request = match control::receive(control.as_raw_fd()) {
            Ok(Some((packet, _))) => ToLauncher::decode(&packet),
            // The host is gone: the harness's stdin closes, its signal to shut down.
            Ok(None) | Err(_) => {
                self.control_open = false;
                self.stdin = None;
                return;
            }
        };
        match request {
            Ok(ToLauncher::Stdin(data)) => {
                if let Some(stdin) = &mut self.stdin
                    && stdin.write_all(&data).is_err()
                {
                    self.stdin = None;
                }
            }
            Ok(ToLauncher::CloseStdin) => self.stdin = None,
            Ok(ToLauncher::Connect(port)) => {
                let answer = match TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
                {
                    Ok(stream) => report(control, &FromLauncher::Connected, Some(stream.as_fd())),
                    Err(e) => report(
                        control,
                        &FromLauncher::ConnectFailed(format!("127.0.0.1:{port}: {e}")),
                        None,
                    ),
                };
                if answer.is_err() {
                    self.control_open = false;
                    self.stdin = None;
                }
            }
            Ok(ToLauncher::StopCommands) => {
                let killed = procs::stop_commands(self.harness);
                self.answer(control, &FromLauncher::Stopped(killed));
            }
            Ok(ToLauncher::UnlinkedBytes) => {
                let bytes = procs::unlinked_bytes(&self.writable);
                self.answer(control, &FromLauncher::Unlinked(bytes));
            }
            Ok(ToLauncher::CountCommands) => {
                let running = procs::count_commands(self.harness);
                self.answer(control, &FromLauncher::Commands(running));
            }
            // The spec comes once, first, and was taken before the relay started.
            Ok(ToLauncher::Spec) => eprintln!("sandbox: ignored a second spec from the host"),
            Err(e) => eprintln!("sandbox: ignored a malformed request from the host: {e}"),
        }
    }
}

/// PID 1's first steps: the sandbox's identity for good, and what the harness and its commands
/// write readable by that identity alone, whatever the host's umask.
fn begin() -> Result<(), String> {
    identity::settle()?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    Ok(())
}

/// Reaps every child that ended; the harness's exit status once it has.
fn reap(harness: Pid) -> Result<Option<u8>, String> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == harness => {
                return Ok(Some(u8::try_from(code).unwrap_or(SETUP_FAILED)));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == harness => {
                return Ok(Some(128u8.saturating_add(signal as u8)));
            }
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return Ok(None),
            // An orphaned command, reaped.
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(format!("waiting for the harness: {e}")),
        }
    }
}

fn listen(port: u16) -> Result<TcpListener, String> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{port} in the sandbox: {e}"))
}

fn report(
    control: BorrowedFd<'_>,
    message: &FromLauncher,
    fd: Option<BorrowedFd<'_>>,
) -> Result<(), String> {
    control::send(control.as_raw_fd(), &message.encode(), fd)
        .map_err(|e| format!("the host's control channel: {e}"))
}

#[allow(unsafe_code)]
fn borrowed(fd: std::os::fd::RawFd) -> BorrowedFd<'static> {
    // SAFETY: the control channel is this stage's stdin, open for the whole life of the
    // process (nothing here closes it).
    unsafe { BorrowedFd::borrow_raw(fd) }
}

/// The self-test: what took effect, on stdout.
pub(super) fn probe() -> Result<u8, String> {
    begin()?;
    let host_uid = identity::host_uid();
    let private_network = netdev::loopback_up();
    let capabilities_dropped = rules::drop_capabilities()?;
    let empty = Spec::probe(None);
    let landlock = rules::harness_domain(&empty)?;
    let seccomp = rules::install_seccomp().is_ok();
    // A command's nested domain must keep it from tracing this process.
    let own = Own::find(2)?;
    let nested_domain = own
        .command(&[PROBE_COMMAND_ARG, &std::process::id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let report = ProbeReport {
        pid_namespace: std::process::id() == 1,
        private_network: private_network.is_ok() && netdev::only_loopback(),
        landlock_abi: rules::abi_number(&landlock),
        landlock: rules::status_name(&landlock).into(),
        nested_domain,
        seccomp,
        capabilities_dropped,
        host_uid,
    };
    println!(
        "{}",
        serde_json::to_string(&report).map_err(|e| e.to_string())?
    );
    Ok(0)
}

/// The probe's nested-domain check: in a command's domain, try to read the memory of `pid`
/// (the probe, in the harness's domain). Exit status 0 when that is refused.
pub(super) fn probe_command(pid: &str) -> u8 {
    let Ok(commands) = rules::command_rules_for_probe() else {
        return 2;
    };
    if rules::command_domain(&commands).is_err() {
        return 2;
    }
    match std::fs::File::open(format!("/proc/{pid}/mem")) {
        Ok(_) => 1,
        Err(_) => 0,
    }
}
