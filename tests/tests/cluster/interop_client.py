"""A non-Rust peer for the certificate interop test (`interop.rs`).

Usage: interop_client.py PKI_DIR HOST PORT USER CERT_NAME...

1. Loads every named certificate (`PKI_DIR/NAME.pem`) with Python's `cryptography`, with
   warnings as errors, and reads its extensions: `cryptography` parses strict DER and
   refuses, for example, an encoded DEFAULT value.
2. Verifies the chains with `cryptography.x509.verification` (RFC 5280 path validation
   with the CA/Browser Forum profile checks): `master` as a TLS server for `localhost`,
   `USER` as a TLS client.
3. Connects to the master over QUIC with `aioquic` (ALPN `slotmarket/1`, mutual TLS with
   the certificate of USER), sends one framed `Nodes` request and reads the framed answer.

Prints one JSON object on stdout; any failure raises and exits non-zero.
"""

import asyncio
import datetime
import json
import ssl
import sys
import warnings

from aioquic.asyncio import QuicConnectionProtocol, connect
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import HandshakeCompleted
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store

ALPN = "slotmarket/1"
PROTOCOL_VERSION = 4  # PROTOCOL_VERSION in common/src/protocol/messages.rs
# Variant indices of `Request` and `Response` in common/src/protocol/messages.rs
# (postcard encodes an enum as its variant index).
REQUEST_NODES = 3
RESPONSE_NODES = 3


def load(pki_dir, name):
    with open(f"{pki_dir}/{name}.pem", "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    # Extensions are parsed lazily: touch them so a DER error surfaces here.
    return cert, [ext.oid.dotted_string for ext in cert.extensions]


def verify_chains(pki_dir, certs, user):
    store = Store([certs["ca"]])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = PolicyBuilder().store(store).time(now)
    server = builder.build_server_verifier(x509.DNSName("localhost"))
    server.verify(certs["master"], [])
    client = builder.build_client_verifier()
    client.verify(certs[user], [])


def varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def nodes_frame():
    # ClientRequest { version: u32, body: Request::Nodes }, length-prefixed big-endian.
    payload = varint(PROTOCOL_VERSION) + varint(REQUEST_NODES)
    return len(payload).to_bytes(4, "big") + payload


def decode_nodes(payload):
    """The agent ids and node names of a `Response::Nodes`."""
    variant, at = read_varint(payload, 0)
    if variant != RESPONSE_NODES:
        return variant, []
    count, at = read_varint(payload, at)
    nodes = []
    for _ in range(count):
        agent, at = read_varint(payload, at)
        length, at = read_varint(payload, at)
        name = payload[at : at + length].decode()
        at += length
        connected = payload[at] == 1
        at += 1
        # map_slots, map_used, reduce_slots, reduce_used, last_seen
        for _ in range(5):
            _, at = read_varint(payload, at)
        nodes.append({"agent": agent, "node": name, "connected": connected})
    return variant, nodes


class Peer(QuicConnectionProtocol):
    """aioquic's stream handling, plus the ALPN the handshake settled on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.alpn = None

    def quic_event_received(self, event):
        if isinstance(event, HandshakeCompleted):
            self.alpn = event.alpn_protocol
        super().quic_event_received(event)


async def ask_nodes(pki_dir, host, port, user):
    config = QuicConfiguration(is_client=True, alpn_protocols=[ALPN], server_name="localhost")
    config.verify_mode = ssl.CERT_REQUIRED
    config.load_verify_locations(cafile=f"{pki_dir}/ca.pem")
    config.load_cert_chain(f"{pki_dir}/{user}.pem", f"{pki_dir}/{user}.key")
    async with connect(host, port, configuration=config, create_protocol=Peer, wait_connected=True) as client:
        alpn = client.alpn
        reader, writer = await client.create_stream()
        writer.write(nodes_frame())
        writer.write_eof()
        length = int.from_bytes(await reader.readexactly(4), "big")
        payload = await reader.readexactly(length)
    variant, nodes = decode_nodes(payload)
    return {"alpn": alpn, "frame_len": length, "variant": variant, "nodes": nodes}


def main():
    warnings.simplefilter("error")
    pki_dir, host, port, user, names = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
    loaded = {name: load(pki_dir, name) for name in names}
    certs = {name: cert for name, (cert, _) in loaded.items()}
    verify_chains(pki_dir, certs, user)
    answer = asyncio.run(asyncio.wait_for(ask_nodes(pki_dir, host, port, user), timeout=30))
    answer["extensions"] = {name: oids for name, (_, oids) in loaded.items()}
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
