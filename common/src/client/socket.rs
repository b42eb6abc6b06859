//! The request client's UDP socket: a plain datagram socket behind quinn's
//! [`AsyncUdpSocket`], so that making a [`Client`](super::Client) does not probe the kernel
//! for UDP GRO.
//!
//! quinn's own socket (`quinn_udp::UdpSocketState::new`) checks for GRO support on every
//! endpoint it makes by binding a second, IPv6 socket and setting `UDP_GRO` on it. Unless
//! another socket on the machine holds that option, setting it turns on a kernel static
//! key and closing the probe turns it off: twice per CLI run the kernel patches its own
//! text and interrupts every CPU (3.7 % of a one-spec submit's samples, and the
//! interrupts land on the master's CPU too). The probe cannot be skipped without patching
//! quinn-udp. A client that makes one or a few requests gains nothing from GRO, GSO, ECN
//! or the packet-info options anyway, so this socket does without them: one datagram per
//! send and per receive. It keeps what matters to QUIC: no IP fragmentation (the
//! `IP_PMTUDISC_PROBE` quinn-udp sets), so the socket would carry quinn's path-MTU
//! discovery, though the master's protocol turns that off (see `transport_config`).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use tokio::io::ReadBuf;

use crate::pki::TlsFiles;
use crate::transport::{self, ALPN, TransportError};

/// A client endpoint for the master at `target`, as [`transport::client_endpoint`] makes
/// one (same TLS configuration and bind address), on a [`PlainUdpSocket`]. Must be called
/// inside a tokio runtime.
pub(super) fn client_endpoint(
    files: &TlsFiles,
    target: SocketAddr,
) -> Result<quinn::Endpoint, TransportError> {
    let config = transport::client_config_for(files, ALPN)?;
    let bind = transport::client_bind_addr(target);
    let bind_error = |source| TransportError::Bind { addr: bind, source };
    let socket = PlainUdpSocket::bind(bind).map_err(bind_error)?;
    let runtime = Arc::new(quinn::TokioRuntime);
    let mut endpoint = quinn::Endpoint::new_with_abstract_socket(
        quinn::EndpointConfig::default(),
        None,
        Arc::new(socket),
        runtime,
    )
    .map_err(bind_error)?;
    endpoint.set_default_client_config(config);
    Ok(endpoint)
}

/// A UDP socket sending and receiving one datagram at a time, without ECN, GSO, GRO or
/// packet info.
#[derive(Debug)]
pub(super) struct PlainUdpSocket {
    io: tokio::net::UdpSocket,
    /// Whether the kernel may fragment what we send (it refused the option forbidding it):
    /// quinn then keeps its packets at the minimum size instead of probing the path MTU.
    may_fragment: bool,
}

impl PlainUdpSocket {
    /// Binds `addr` and forbids IP fragmentation on the socket. Must be called inside a
    /// tokio runtime.
    pub(super) fn bind(addr: SocketAddr) -> io::Result<PlainUdpSocket> {
        let socket = std::net::UdpSocket::bind(addr)?;
        socket.set_nonblocking(true)?;
        let may_fragment = !forbid_fragmentation(&socket, addr.is_ipv4())?;
        Ok(PlainUdpSocket { io: tokio::net::UdpSocket::from_std(socket)?, may_fragment })
    }
}

/// Sets the don't-fragment options quinn-udp sets on its sockets (Linux's
/// `IP_PMTUDISC_PROBE`: the interface MTU, not the kernel's guess, and no fragments).
/// Answers whether the platform supports them.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn forbid_fragmentation(socket: &std::net::UdpSocket, ipv4: bool) -> io::Result<bool> {
    // Set even on an IPv6 socket, for IPv4-mapped addresses.
    let mut supported = set_option(socket, libc::IPPROTO_IP, libc::IP_MTU_DISCOVER, libc::IP_PMTUDISC_PROBE)?;
    if !ipv4 {
        supported &=
            set_option(socket, libc::IPPROTO_IPV6, libc::IPV6_MTU_DISCOVER, libc::IPV6_PMTUDISC_PROBE)?;
        supported &= set_option(socket, libc::IPPROTO_IPV6, libc::IPV6_DONTFRAG, 1)?;
    }
    Ok(supported)
}

/// Elsewhere the kernel may fragment: quinn keeps to its minimum packet size.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn forbid_fragmentation(_socket: &std::net::UdpSocket, _ipv4: bool) -> io::Result<bool> {
    Ok(false)
}

/// `setsockopt` of one `int` option: `Ok(false)` if the platform does not know it.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn set_option(
    socket: &std::net::UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<bool> {
    // SAFETY: a valid socket descriptor we own, and a pointer to an `int` with its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&raw const value).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOPROTOOPT | libc::EOPNOTSUPP) => Ok(false),
        _ => Err(err),
    }
}

impl AsyncUdpSocket for PlainUdpSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        Box::pin(WritablePoller { socket: self })
    }

    fn try_send(&self, transmit: &Transmit) -> io::Result<()> {
        // quinn only batches datagrams (`segment_size`) when `max_transmit_segments` is
        // above one, which it is not here; split them anyway rather than send one
        // oversized datagram.
        let segment = transmit.segment_size.unwrap_or(transmit.contents.len()).max(1);
        for datagram in transmit.contents.chunks(segment) {
            self.io.try_send_to(datagram, transmit.destination)?;
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let (Some(buf), Some(meta)) = (bufs.first_mut(), meta.first_mut()) else {
            return Poll::Ready(Ok(0));
        };
        let mut read = ReadBuf::new(buf);
        let addr = ready!(self.io.poll_recv_from(cx, &mut read))?;
        let len = read.filled().len();
        *meta = RecvMeta { addr, len, stride: len, ecn: None, dst_ip: None };
        Poll::Ready(Ok(1))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    fn may_fragment(&self) -> bool {
        self.may_fragment
    }
}

/// Tells quinn when the socket can take another datagram.
#[derive(Debug)]
struct WritablePoller {
    socket: Arc<PlainUdpSocket>,
}

impl UdpPoller for WritablePoller {
    fn poll_writable(self: Pin<&mut Self>, cx: &mut Context) -> Poll<io::Result<()>> {
        self.socket.io.poll_send_ready(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One datagram each way between two plain sockets, through quinn's interface: the
    /// receiver learns the sender's address and the datagram's length.
    #[tokio::test]
    async fn datagrams_go_out_and_come_back_whole() {
        let a = Arc::new(PlainUdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap());
        let b = PlainUdpSocket::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let (a_addr, b_addr) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        assert!(!a.may_fragment(), "Linux forbids fragmentation on request");

        let mut poller = a.clone().create_io_poller();
        std::future::poll_fn(|cx| poller.as_mut().poll_writable(cx)).await.unwrap();
        let contents = b"one datagram, then two".repeat(3);
        let transmit = Transmit {
            destination: b_addr,
            ecn: None,
            contents: &contents,
            segment_size: Some(22),
            src_ip: None,
        };
        a.try_send(&transmit).unwrap();

        let mut received = Vec::new();
        for _ in 0..3 {
            let mut storage = [0u8; 64];
            let mut bufs = [IoSliceMut::new(&mut storage)];
            let mut meta = [RecvMeta::default()];
            let n = std::future::poll_fn(|cx| b.poll_recv(cx, &mut bufs, &mut meta)).await.unwrap();
            assert_eq!((n, meta[0].addr, meta[0].len, meta[0].stride), (1, a_addr, 22, 22));
            received.extend_from_slice(&bufs[0][..meta[0].len]);
        }
        assert_eq!(received, contents, "three datagrams of 22 bytes, in order");
    }
}
