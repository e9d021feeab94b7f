//! The sandbox's loopback interface: a new network namespace has one, down.

use std::io;
use std::os::fd::AsRawFd as _;

/// Brings `lo` up (needs `CAP_NET_ADMIN` in the namespace's user namespace: PID 1 before it
/// drops its capabilities).
#[allow(unsafe_code)]
pub(super) fn loopback_up() -> io::Result<()> {
    // Any socket of the namespace serves the ioctl.
    let socket = std::net::UdpSocket::bind("0.0.0.0:0")?;
    // SAFETY: `ifreq` is plain old data (zeroed is a valid value), the name is NUL-terminated
    // within its array, and both ioctls read or write only that struct, which lives across the
    // calls; the descriptor is a socket owned by this function.
    unsafe {
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut request) < 0 {
            return Err(io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &request) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether this process's network namespace has no interface but `lo` (read from
/// `/proc/net/dev`, which shows the reader's namespace).
pub(super) fn only_loopback() -> bool {
    std::fs::read_to_string("/proc/net/dev").is_ok_and(|table| {
        table
            .lines()
            .skip(2)
            .filter_map(|line| line.split(':').next())
            .all(|name| name.trim() == "lo")
    })
}
