# Run by a command inside a sandbox (`confinement_network.rs`): tries to create a socket of every
# address family 0..=45, type (STREAM, DGRAM, RAW, SEQPACKET) and protocol (0, TCP, UDP, SCTP,
# MPTCP, RAW, ICMP), and to reach every port listening on the sandbox's loopback with each one
# it could create (an IPv4 and a v4-mapped IPv6 address, whatever the family). Prints
# `CREATED family type protocol`, `REACHED family type protocol port address how` (the
# connection completed, or the listener answered), and `MPTCP family created|refused <errno>`.
import ctypes, errno, os, select, socket, struct

libc = ctypes.CDLL(None, use_errno=True)
NONBLOCK = 0o4000
TYPES = {1: "STREAM", 2: "DGRAM", 3: "RAW", 5: "SEQPACKET"}
PROTOCOLS = [0, 6, 17, 132, 262, 255, 1]

def listening():
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A":
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)

def addresses(port):
    v4 = struct.pack("=H", 2) + struct.pack(">H", port) + bytes([127, 0, 0, 1]) + bytes(8)
    v6 = (struct.pack("=H", 10) + struct.pack(">H", port) + bytes(4)
          + bytes(10) + b"\xff\xff" + bytes([127, 0, 0, 1]) + bytes(4))
    return [("v4", v4), ("v6", v6)]

def reached(fd, kind, address):
    buf = ctypes.create_string_buffer(address)
    if libc.connect(fd, buf, len(address)) != 0:
        if ctypes.get_errno() != errno.EINPROGRESS:
            return None
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if not poller.poll(1000):
            return None
        value = ctypes.c_int(0)
        size = ctypes.c_uint(4)
        libc.getsockopt(fd, socket.SOL_SOCKET, socket.SO_ERROR, ctypes.byref(value), ctypes.byref(size))
        if value.value != 0:
            return None
    if kind in (1, 5):
        connected = "connected"
    else:
        connected = None
    request = b"GET / HTTP/1.0\r\n\r\n"
    libc.send(fd, request, len(request), 0x4000)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    if poller.poll(1000):
        answer = ctypes.create_string_buffer(256)
        n = libc.recv(fd, answer, 256, 0x40)
        if n > 0:
            return "answered " + answer.raw[:n].split(b"\r\n")[0].decode("latin-1")
    return connected

ports = listening()
print("LISTENING", " ".join(map(str, ports)))
created = 0
for family in range(46):
    for kind in TYPES:
        for protocol in PROTOCOLS:
            fd = libc.socket(family, kind | NONBLOCK, protocol)
            if fd < 0:
                continue
            created += 1
            print("CREATED", family, TYPES[kind], protocol)
            for port in ports:
                for name, address in addresses(port):
                    how = reached(fd, kind, address)
                    if how:
                        print("REACHED", family, TYPES[kind], protocol, port, name, how)
                    os.close(fd)
                    fd = libc.socket(family, kind | NONBLOCK, protocol)
            if fd >= 0:
                os.close(fd)
for family in (2, 10):
    fd = libc.socket(family, 1, 262)
    print("MPTCP", family, "created" if fd >= 0 else "refused " + errno.errorcode.get(ctypes.get_errno(), "?"))
print("CREATED-TOTAL", created)
