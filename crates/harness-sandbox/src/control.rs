//! The control channel between a host and a running launcher: a `SOCK_SEQPACKET` socket pair
//! (the launcher's stdin and stdout), one message per packet, file descriptors passed beside a
//! message (`SCM_RIGHTS`). It carries the harness's stdio both ways (the harness's own pipes end
//! at the sandbox's init), the listeners the launcher opens inside for the host's services, and
//! the sockets it connects inside for the host. Its first message is the spec (a sealed memfd
//! beside it), which the launcher's stages read from there, never from their command lines.
//!
//! A message is a tag byte and a payload; this module encodes and decodes them, and sends and
//! receives them on a raw socket (the host wraps the same calls in tokio's readiness).

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

/// The most bytes of stdio one message carries (well under a socket's send buffer).
pub(crate) const STDIO_CHUNK: usize = 32 * 1024;

/// The largest packet either side sends (a stdio chunk and its tag).
const MAX_PACKET: usize = STDIO_CHUNK + 1;

/// A network service the host serves inside the sandbox, on a listener the launcher opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Service {
    /// The model endpoint (`MODEL_PORT`).
    Model,
    /// The egress proxy (`EGRESS_PORT`).
    Egress,
}

impl Service {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::Egress => "egress",
        }
    }
}

/// What the host asks of the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ToLauncher {
    /// Bytes for the harness's stdin.
    Stdin(Vec<u8>),
    /// Close the harness's stdin (its signal to shut down).
    CloseStdin,
    /// Connect to this port on the sandbox's loopback and send the socket back
    /// ([`FromLauncher::Connected`] or [`FromLauncher::ConnectFailed`], in request order).
    Connect(u16),
    /// The launcher's spec, in the memfd passed beside the message: the channel's first message.
    Spec,
    /// Kill every process of the sandbox but its PID 1 and the harness
    /// ([`FromLauncher::Stopped`]).
    StopCommands,
    /// Measure the disk held by files the sandbox's processes keep open after they were unlinked
    /// ([`FromLauncher::Unlinked`]).
    UnlinkedBytes,
    /// Count the processes of the sandbox but its PID 1 and the harness
    /// ([`FromLauncher::Commands`]).
    CountCommands,
}

/// What the launcher tells the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FromLauncher {
    /// Bytes the harness wrote to its stdout.
    Stdout(Vec<u8>),
    /// A listener for `Service`, passed beside the message.
    Listener(Service),
    /// The socket of the oldest pending `Connect`, passed beside the message.
    Connected,
    /// The oldest pending `Connect` failed.
    ConnectFailed(String),
    /// The harness is running (its pid inside the sandbox).
    Started(u32),
    /// The sandbox could not be completed; the launcher exits.
    Failed(String),
    /// The oldest pending `StopCommands` is done: how many processes were killed.
    Stopped(u32),
    /// The answer to the oldest pending `UnlinkedBytes`, in bytes.
    Unlinked(u64),
    /// The answer to the oldest pending `CountCommands`: how many processes run.
    Commands(u32),
}

const STDIN: u8 = 1;
const CLOSE_STDIN: u8 = 2;
const CONNECT: u8 = 3;
const SPEC: u8 = 4;
const STOP_COMMANDS: u8 = 5;
const UNLINKED_BYTES: u8 = 6;
const COUNT_COMMANDS: u8 = 7;

const STDOUT: u8 = 1;
const LISTENER: u8 = 2;
const CONNECTED: u8 = 3;
const CONNECT_FAILED: u8 = 4;
const STARTED: u8 = 5;
const FAILED: u8 = 6;
const STOPPED: u8 = 7;
const UNLINKED: u8 = 8;
const COMMANDS: u8 = 9;

impl ToLauncher {
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Self::Stdin(data) => tagged(STDIN, data),
            Self::CloseStdin => vec![CLOSE_STDIN],
            Self::Connect(port) => tagged(CONNECT, &port.to_le_bytes()),
            Self::Spec => vec![SPEC],
            Self::StopCommands => vec![STOP_COMMANDS],
            Self::UnlinkedBytes => vec![UNLINKED_BYTES],
            Self::CountCommands => vec![COUNT_COMMANDS],
        }
    }

    #[cfg_attr(not(feature = "launcher"), allow(dead_code))]
    pub(crate) fn decode(packet: &[u8]) -> Result<Self, String> {
        let (tag, payload) = packet.split_first().ok_or("an empty control message")?;
        match *tag {
            STDIN => Ok(Self::Stdin(payload.to_vec())),
            CLOSE_STDIN => Ok(Self::CloseStdin),
            CONNECT => {
                let port: [u8; 2] = payload
                    .try_into()
                    .map_err(|_| format!("a connect request of {} bytes", payload.len()))?;
                Ok(Self::Connect(u16::from_le_bytes(port)))
            }
            SPEC => Ok(Self::Spec),
            STOP_COMMANDS => Ok(Self::StopCommands),
            UNLINKED_BYTES => Ok(Self::UnlinkedBytes),
            COUNT_COMMANDS => Ok(Self::CountCommands),
            other => Err(format!("an unknown request (tag {other})")),
        }
    }
}

impl FromLauncher {
    #[cfg_attr(not(feature = "launcher"), allow(dead_code))]
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Self::Stdout(data) => tagged(STDOUT, data),
            Self::Listener(Service::Model) => tagged(LISTENER, b"model"),
            Self::Listener(Service::Egress) => tagged(LISTENER, b"egress"),
            Self::Connected => vec![CONNECTED],
            Self::ConnectFailed(why) => tagged(CONNECT_FAILED, why.as_bytes()),
            Self::Started(pid) => tagged(STARTED, &pid.to_le_bytes()),
            Self::Failed(why) => tagged(FAILED, why.as_bytes()),
            Self::Stopped(count) => tagged(STOPPED, &count.to_le_bytes()),
            Self::Unlinked(bytes) => tagged(UNLINKED, &bytes.to_le_bytes()),
            Self::Commands(count) => tagged(COMMANDS, &count.to_le_bytes()),
        }
    }

    pub(crate) fn decode(packet: &[u8]) -> Result<Self, String> {
        let (tag, payload) = packet.split_first().ok_or("an empty control message")?;
        let text = || String::from_utf8_lossy(payload).into_owned();
        match *tag {
            STDOUT => Ok(Self::Stdout(payload.to_vec())),
            LISTENER => match payload {
                b"model" => Ok(Self::Listener(Service::Model)),
                b"egress" => Ok(Self::Listener(Service::Egress)),
                other => Err(format!(
                    "a listener for an unknown service `{}`",
                    String::from_utf8_lossy(other)
                )),
            },
            CONNECTED => Ok(Self::Connected),
            CONNECT_FAILED => Ok(Self::ConnectFailed(text())),
            STARTED => {
                let pid: [u8; 4] = payload
                    .try_into()
                    .map_err(|_| "a malformed start report".to_owned())?;
                Ok(Self::Started(u32::from_le_bytes(pid)))
            }
            FAILED => Ok(Self::Failed(text())),
            STOPPED => {
                let count: [u8; 4] = payload
                    .try_into()
                    .map_err(|_| "a malformed stop report".to_owned())?;
                Ok(Self::Stopped(u32::from_le_bytes(count)))
            }
            UNLINKED => {
                let bytes: [u8; 8] = payload
                    .try_into()
                    .map_err(|_| "a malformed unlinked-bytes report".to_owned())?;
                Ok(Self::Unlinked(u64::from_le_bytes(bytes)))
            }
            COMMANDS => {
                let count: [u8; 4] = payload
                    .try_into()
                    .map_err(|_| "a malformed command count".to_owned())?;
                Ok(Self::Commands(u32::from_le_bytes(count)))
            }
            other => Err(format!("an unknown report (tag {other})")),
        }
    }

    /// Whether a file descriptor travels with this message.
    pub(crate) fn carries_fd(&self) -> bool {
        matches!(self, Self::Listener(_) | Self::Connected)
    }
}

fn tagged(tag: u8, payload: &[u8]) -> Vec<u8> {
    let mut packet = Vec::with_capacity(payload.len() + 1);
    packet.push(tag);
    packet.extend_from_slice(payload);
    packet
}

/// Sends one packet, with `fd` beside it. Blocks (or fails with `EAGAIN` on a non-blocking
/// socket) when the peer's buffer is full.
pub(crate) fn send(socket: RawFd, packet: &[u8], fd: Option<BorrowedFd<'_>>) -> nix::Result<()> {
    let iov = [IoSlice::new(packet)];
    let fds;
    let control: &[ControlMessage<'_>] = match fd {
        Some(fd) => {
            fds = [fd.as_raw_fd()];
            &[ControlMessage::ScmRights(&fds)]
        }
        None => &[],
    };
    sendmsg::<()>(socket, &iov, control, MsgFlags::MSG_NOSIGNAL, None)?;
    Ok(())
}

/// Receives one packet and the descriptors passed beside it; `None` at the end of the stream
/// (the peer closed its end).
pub(crate) fn receive(socket: RawFd) -> nix::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    receive_with(socket, MsgFlags::empty())
}

/// Like [`receive`], but leaves the packet for the next reader (which gets its own copies of the
/// descriptors).
#[cfg_attr(not(feature = "launcher"), allow(dead_code))]
pub(crate) fn peek(socket: RawFd) -> nix::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    receive_with(socket, MsgFlags::MSG_PEEK)
}

fn receive_with(socket: RawFd, flags: MsgFlags) -> nix::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut buffer = vec![0u8; MAX_PACKET];
    let mut space = nix::cmsg_space!([RawFd; 4]);
    let (bytes, fds) = {
        let mut iov = [IoSliceMut::new(&mut buffer)];
        let message = recvmsg::<()>(
            socket,
            &mut iov,
            Some(&mut space),
            flags | MsgFlags::MSG_CMSG_CLOEXEC,
        )?;
        let mut fds = Vec::new();
        for cmsg in message.cmsgs()? {
            if let ControlMessageOwned::ScmRights(received) = cmsg {
                // Ours now: the kernel installed them in this process for this message.
                fds.extend(received.into_iter().map(owned));
            }
        }
        (message.bytes, fds)
    };
    if bytes == 0 && fds.is_empty() {
        return Ok(None);
    }
    buffer.truncate(bytes);
    Ok(Some((buffer, fds)))
}

/// Takes ownership of a descriptor the kernel just gave this process.
#[allow(unsafe_code)]
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was installed in this process by `recvmsg` for this message (SCM_RIGHTS) and
    // nothing else refers to it yet, so it is open and owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    use std::os::fd::AsFd;

    #[test]
    fn every_message_survives_its_encoding() {
        for request in [
            ToLauncher::Stdin(b"\x05\0\0\0hello".to_vec()),
            ToLauncher::CloseStdin,
            ToLauncher::Connect(40123),
            ToLauncher::Spec,
            ToLauncher::StopCommands,
            ToLauncher::UnlinkedBytes,
            ToLauncher::CountCommands,
        ] {
            assert_eq!(ToLauncher::decode(&request.encode()).unwrap(), request);
        }
        for report in [
            FromLauncher::Stdout(vec![1, 2, 3]),
            FromLauncher::Listener(Service::Model),
            FromLauncher::Listener(Service::Egress),
            FromLauncher::Connected,
            FromLauncher::ConnectFailed("refused".into()),
            FromLauncher::Started(7),
            FromLauncher::Failed("no loopback".into()),
            FromLauncher::Stopped(3),
            FromLauncher::Unlinked(5 << 20),
            FromLauncher::Commands(2),
        ] {
            assert_eq!(FromLauncher::decode(&report.encode()).unwrap(), report);
        }
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        assert!(ToLauncher::decode(&[]).is_err());
        assert!(ToLauncher::decode(&[CONNECT, 1]).is_err());
        assert!(ToLauncher::decode(&[99]).is_err());
        assert!(FromLauncher::decode(&[LISTENER, b'x']).is_err());
        assert!(FromLauncher::decode(&[STARTED, 1, 2]).is_err());
        assert!(FromLauncher::decode(&[STOPPED, 1]).is_err());
        assert!(FromLauncher::decode(&[COMMANDS, 1, 2, 3]).is_err());
        assert!(FromLauncher::decode(&[UNLINKED, 1, 2, 3, 4]).is_err());
    }

    #[test]
    fn a_descriptor_travels_beside_its_message_and_the_end_is_seen() {
        let (a, b) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let file = tempfile::tempfile().unwrap();
        let packet = FromLauncher::Listener(Service::Model).encode();
        send(a.as_raw_fd(), &packet, Some(file.as_fd())).unwrap();
        send(a.as_raw_fd(), &FromLauncher::Started(3).encode(), None).unwrap();
        let (got, fds) = receive(b.as_raw_fd()).unwrap().unwrap();
        assert_eq!(
            FromLauncher::decode(&got).unwrap(),
            FromLauncher::Listener(Service::Model)
        );
        assert_eq!(fds.len(), 1);
        let (got, fds) = receive(b.as_raw_fd()).unwrap().unwrap();
        assert_eq!(
            FromLauncher::decode(&got).unwrap(),
            FromLauncher::Started(3)
        );
        assert!(fds.is_empty());
        drop(a);
        assert!(receive(b.as_raw_fd()).unwrap().is_none());
    }
}
