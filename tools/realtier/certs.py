"""Certificates for a loopback control plane: one CA, the API server's serving pair, client pairs,
and the service-account signing key. Made fresh for every run, valid for a week."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


def _write_key(
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey,
    path: Path,
    form: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8,
) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, form, serialization.NoEncryption())
    )
    path.chmod(0o600)


class CertificateAuthority:
    """A throwaway CA that signs the serving and client certificates of one control plane.

    `common_name`, `dns_names`, `validity` and `pkcs1_rsa` are for a CA another program checks
    as its own (Kueue's certificate rotator wants its CA named, valid 90 days ahead, and its key
    RSA in PKCS #1 form: cert-controller's buildArtifactsFromSecret reads no other)."""

    def __init__(
        self,
        directory: Path,
        *,
        common_name: str = "gpu-cluster-realtier-ca",
        dns_names: tuple[str, ...] = (),
        validity: datetime.timedelta = _VALIDITY,
        pkcs1_rsa: bool = False,
    ) -> None:
        self.directory = directory
        self._validity = validity
        self._key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if pkcs1_rsa
            else ec.generate_private_key(ec.SECP256R1())
        )
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
        )
        if dns_names:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
            )
        self._cert = builder.sign(self._key, hashes.SHA256())
        self.cert_path = directory / "ca.crt"
        self.cert_path.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))
        self.key_path = directory / "ca.key"
        _write_key(
            self._key,
            self.key_path,
            # TraditionalOpenSSL is PKCS #1 for an RSA key.
            serialization.PrivateFormat.TraditionalOpenSSL
            if pkcs1_rsa
            else serialization.PrivateFormat.PKCS8,
        )

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        server: bool = False,
        dns_names: tuple[str, ...] = (),
        ip_addresses: tuple[str, ...] = (),
    ) -> Pair:
        """A leaf pair: a client (CN = user, O = groups) or a server for localhost/127.0.0.1,
        `dns_names` and `ip_addresses`."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + self._validity)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        *(x509.DNSName(n) for n in dns_names),
                        *(
                            x509.IPAddress(ipaddress.ip_address(a))
                            for a in ("127.0.0.1", *ip_addresses)
                        ),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(self._key, hashes.SHA256())
        pair = Pair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, pair.key)
        return pair


def service_account_keys(directory: Path) -> Pair:
    """The key pair the API server signs service-account tokens with (public half verifies them)."""
    key = ec.generate_private_key(ec.SECP256R1())
    pair = Pair(directory / "sa.pub", directory / "sa.key")
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _write_key(key, pair.key)
    return pair
