"""TLS between the manager, its clients, its pilots and its peers (docs/security.md).

What is decided here: whether a plain-HTTP address may be used (only on the loopback
interface, unless the operator allows it explicitly), the client-side SSL context that
verifies the manager against a CA file, whether a server certificate and key fit together,
and how a self-signed pair for a trial is made (with the `cryptography` package, the key
written readable by its owner only).

Nothing of isthmus is imported: the pilot, the CLI, the server and the federation all use it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

CERT_NAME = "cert.pem"
KEY_NAME = "key.pem"

SELF_SIGNED_DAYS = 365
"""How long a self-signed certificate is valid."""


class InsecureTransportError(ValueError):
    """A plain-HTTP address outside the loopback interface, not allowed explicitly."""


def is_loopback(host: str) -> bool:
    """True when `host` names this machine's loopback interface (localhost, 127.0.0.0/8, ::1)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_plain_http(url: str, allow: bool, what: str, how_to_allow: str) -> None:
    """InsecureTransportError when `url` is http:// to a host outside loopback and `allow` is False.

    `what` names the connection in the message (e.g. "the manager URL"), `how_to_allow` the
    option or setting that accepts it anyway.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or allow or is_loopback(parts.hostname or ""):
        return
    raise InsecureTransportError(
        f"refusing plain HTTP to {parts.hostname} ({what} {url}): tokens would cross the network in clear; "
        f"use https:// or allow it with {how_to_allow}"
    )


def client_context(ca_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """An SSL context verifying servers against `ca_file` (PEM), or against the system's trusted
    CAs when it is None; hostnames are checked. ValueError naming the file when it cannot be read."""
    if ca_file is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cafile=os.fspath(ca_file))
    except OSError as exc:  # ssl.SSLError included (not PEM)
        reason = exc.strerror or str(exc)
        raise ValueError(f"cannot read CA file {ca_file}: {reason}") from None


def check_server_pair(cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str]) -> None:
    """ValueError naming the files when the certificate and key cannot be read or do not match."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(os.fspath(cert_file), os.fspath(key_file))
    except ssl.SSLError as exc:  # before OSError, its base class
        raise ValueError(
            f"TLS certificate {cert_file} and key {key_file} cannot be used together: {exc.reason or exc}"
        ) from None
    except OSError as exc:
        raise ValueError(f"cannot read TLS certificate {cert_file} or key {key_file}: {exc.strerror or exc}") from None


def is_self_signed(cert_file: str | os.PathLike[str]) -> bool:
    """True when the first certificate of `cert_file` is its own issuer (then it is the CA file
    its clients need); False for a certificate a CA issued."""
    from cryptography import x509

    cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    return cert.issuer == cert.subject


def machine_names() -> list[str]:
    """This machine's names for a self-signed certificate: its host name, its fully qualified
    name when it differs, and localhost."""
    names = [socket.gethostname(), socket.getfqdn(), "localhost"]
    return [n for i, n in enumerate(names) if n and n not in names[:i]]


def make_self_signed(directory: Path, names: Sequence[str] = (), *, days: int = SELF_SIGNED_DAYS) -> tuple[Path, Path]:
    """Write a self-signed certificate and its key into `directory` (cert.pem, key.pem; the key
    mode 0600); their paths. The certificate names `names` (default: `machine_names()`),
    127.0.0.1 and ::1, and is its own CA: clients verify the server with cert.pem as CA file.

    FileExistsError when either file is there already (a pair in use is never overwritten).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / CERT_NAME, directory / KEY_NAME
    for p in (cert_path, key_path):
        if p.exists():
            raise FileExistsError(f"{p} exists already: remove it, or use the pair that is there")
    hosts = list(dict.fromkeys(names or machine_names()))
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    dns: list[str] = []
    for h in hosts:
        try:
            ip = ipaddress.ip_address(h)
        except ValueError:
            dns.append(h)
        else:
            if ip not in ips:
                ips.append(ip)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, (dns or [str(ips[0])])[0])])
    now = dt.datetime.now(dt.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(
            x509.SubjectAlternativeName([*(x509.DNSName(d) for d in dns), *(x509.IPAddress(i) for i in ips)]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key_pem)
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert_path, key_path


def check_ca_verifies(
    cert_file: str | os.PathLike[str], key_file: str | os.PathLike[str], ca_file: str | os.PathLike[str]
) -> None:
    """ValueError when a client trusting `ca_file` would refuse the server certificate
    `cert_file` (its chain; its names are each client's to check): a handshake in memory."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(os.fspath(cert_file), os.fspath(key_file))
    client = client_context(ca_file)
    client.check_hostname = False
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    ends = (client.wrap_bio(c_in, c_out), server.wrap_bio(s_in, s_out, server_side=True))
    for _ in range(10):
        waiting = False
        for end in ends:
            try:
                end.do_handshake()
            except ssl.SSLWantReadError:
                waiting = True
            except ssl.SSLCertVerificationError as exc:
                raise ValueError(
                    f"CA file {ca_file} does not verify certificate {cert_file}: {exc.verify_message}"
                ) from None
        if not waiting:
            return
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    raise ValueError(f"CA file {ca_file} and certificate {cert_file}: the handshake did not end")
