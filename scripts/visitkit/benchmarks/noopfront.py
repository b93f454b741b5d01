"""HAProxy answering as the no-op function does (benchmarks/noop/main.py: 202 to a POST, else 200, and
its JSON), on one frontend per way of connecting: plain HTTP, HTTPS on kept-alive connections, and
HTTPS closing the connection after every response (`option httpclose`), so that the client opens a
new one, with a full TLS handshake, for every request. TLS is terminated with a self-signed ECDSA
P-256 certificate made for the run in a temporary folder (the `cryptography` package, else the
`openssl` command).

HAProxy answers itself, in C: the Python no-op (one functions-framework process, which topped out at
~3,300 requests/s flat out on this kit's machines in the loadgen benchmark of 2026-11-23, in git
history) would saturate before the Locust worker it is there to measure, on the same two cores.
"""
import contextlib
import datetime
import ipaddress
import shutil
import socket
import ssl
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from visitkit.errors import VisitkitError
from visitkit.net import free_port, wait_until
from visitkit.twin import haproxy

BODY = '{"visit_type": "home", "count": 0}'  # the no-op function's answer
MAX_CONNECTIONS = 8000  # HAProxy asks for twice this in open files: within this machine's 20,000
CONNECTION_MODES = {"kept-alive": [], "per-request": ["    option httpclose"]}
HAPROXY_MISSING = "HAProxy was not found: install it (Debian: apt-get install haproxy)."


def self_signed_pem(folder: Path) -> Path:
    """A certificate for 127.0.0.1 and its key, in the one PEM file HAProxy's `crt` reads."""
    path = folder / "noop.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        key_file, cert_file = folder / "key.pem", folder / "cert.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key_file), "-out", str(cert_file), "-days", "1", "-subj",
                        "/CN=127.0.0.1"], check=True, capture_output=True)
        path.write_bytes(cert_file.read_bytes() + key_file.read_bytes())
        return path
    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(private, hashes.SHA256()))
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def render_config(frontends: Mapping[str, tuple[str, str, int]], pem: Path | None, stats_address: str) -> str:
    """frontends: name -> (scheme, connections: a CONNECTION_MODES key, port)."""
    lines = ["global", f"    maxconn {MAX_CONNECTIONS}", f"    stats socket ipv4@{stats_address} level operator", "",
             "defaults", "    mode http", "    timeout connect 5s", "    timeout client 60s", "    timeout server 60s"]
    for name, (scheme, connections, port) in frontends.items():
        tls = f" ssl crt {pem}" if scheme == "https" else ""
        lines += ["", f"frontend {name}", f"    bind 127.0.0.1:{port}{tls}", *CONNECTION_MODES[connections],
                  f"    http-request return status 202 content-type application/json string '{BODY}' if METH_POST",
                  f"    http-request return status 200 content-type application/json string '{BODY}'"]
    return "\n".join(lines) + "\n"


def haproxy_version() -> str:
    first = subprocess.run(["haproxy", "-v"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    return first.split()[2] if first.startswith("HAProxy version") else first  # "2.6.12-1+deb12u4"


def tls_session(port: int) -> str:
    """The protocol and cipher a client like Locust's negotiates (its context: no verification)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, context.wrap_socket(raw) as tls:
        cipher = tls.cipher()
        return f"{tls.version()} {cipher[0] if cipher else ''}".strip()


class NoopFront:
    """The running HAProxy: `urls[name]`, and `counts()` of connections and requests per frontend."""

    def __init__(self, urls: dict[str, str], stats_address: str, tls: str, version: str) -> None:
        self.urls, self.stats_address, self.tls, self.version = urls, stats_address, tls, version

    def counts(self) -> dict[str, tuple[int, int]]:
        """name -> (connections, requests) each frontend has taken so far (HAProxy's conn_tot, req_tot)."""
        return {row["pxname"]: (int(row["conn_tot"] or 0), int(row["req_tot"] or 0))
                for row in haproxy.show_stat(self.stats_address) if row["svname"] == "FRONTEND"}


@contextlib.contextmanager
def running(frontends: Mapping[str, tuple[str, str]]) -> Iterator[NoopFront]:
    """HAProxy with frontends name -> (scheme, connections), on free ports, until the block ends; the
    certificate lives in a temporary folder that goes with it."""
    if not shutil.which("haproxy"):
        raise VisitkitError(HAPROXY_MISSING)
    with tempfile.TemporaryDirectory(prefix="bench-noop-front-") as temp:
        folder = Path(temp)
        ports = {name: free_port() for name in frontends}
        pem = self_signed_pem(folder) if any(scheme == "https" for scheme, _ in frontends.values()) else None
        stats = f"127.0.0.1:{free_port()}"
        config = folder / "haproxy.cfg"
        config.write_text(render_config({name: (*frontends[name], port) for name, port in ports.items()}, pem, stats))
        check = subprocess.run(["haproxy", "-c", "-q", "-f", str(config)], capture_output=True, text=True)
        if check.returncode:
            raise VisitkitError(f"HAProxy refused the no-op's configuration: {check.stderr.strip()}")
        process = subprocess.Popen(["haproxy", "-db", "-f", str(config)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            if not wait_until(lambda: all(listening(port) for port in ports.values()), timeout=10):
                raise VisitkitError("HAProxy did not listen on the no-op's ports within 10 s")
            tls = next((tls_session(ports[name]) for name, (scheme, _) in frontends.items() if scheme == "https"), "")
            yield NoopFront({name: f"{frontends[name][0]}://127.0.0.1:{port}" for name, port in ports.items()},
                            stats, tls, haproxy_version())
        finally:
            process.kill()
            process.wait()


def listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False
