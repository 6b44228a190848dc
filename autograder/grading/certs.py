"""Certificates for a grading cluster that obeys only the course's own machines.

    python -m autograder.grading.certs DIR

writes a certificate authority of the course's own (``ca.pem``; its key ``ca-key.pem``) and,
signed by it, a certificate and key for the scheduler, the workers and the grade command
(``scheduler.pem``/``scheduler-key.pem``, ``worker…``, ``client…``).  Every Dask connection of
the cluster is then mutual TLS: each side shows a certificate of this authority or is refused,
so a student who can reach the scheduler's port can neither send it work nor read results.
Keys are written readable by their owner only; copy each machine only what its role needs (the
CA certificate and its own pair; ``ca-key.pem`` stays with the instructor).
"""
from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

ROLES = ("scheduler", "worker", "client")
DAYS = 365


def _write(path: Path, content: bytes, private: bool) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    descriptor = os.open(path, flags, 0o600 if private else 0o644)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)


def make_certificates(folder: Path, days: int = DAYS) -> dict[str, Path]:
    """The authority and one signed pair per role in ``folder``; returns the paths by name."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "normalization-layers grading"),
                          x509.NameAttribute(NameOID.COMMON_NAME, common)])

    def pem(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("grading CA")).issuer_name(name("grading CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    paths = {"ca": folder / "ca.pem", "ca-key": folder / "ca-key.pem"}
    _write(paths["ca"], ca.public_bytes(serialization.Encoding.PEM), private=False)
    _write(paths["ca-key"], pem(ca_key), private=True)
    for role in ROLES:
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = (x509.CertificateBuilder().subject_name(name(f"grading {role}")).issuer_name(ca.subject)
                       .public_key(key.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=5))
                       .not_valid_after(now + datetime.timedelta(days=days))
                       .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                       .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                             ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                       .sign(ca_key, hashes.SHA256()))
        paths[role], paths[f"{role}-key"] = folder / f"{role}.pem", folder / f"{role}-key.pem"
        _write(paths[role], certificate.public_bytes(serialization.Encoding.PEM), private=False)
        _write(paths[f"{role}-key"], pem(key), private=True)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grading.certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--days", type=int, default=DAYS, help=f"validity (default {DAYS} days)")
    args = parser.parse_args(argv)
    paths = make_certificates(args.folder, args.days)
    folder = args.folder
    print(f"Wrote {', '.join(p.name for p in paths.values())} into {folder}.\n"
          f"scheduler: dask scheduler --protocol tls --host <private address> --no-dashboard --tls-ca-file {folder}/ca.pem "
          f"--tls-cert {folder}/scheduler.pem --tls-key {folder}/scheduler-key.pem\n"
          f"worker:    dask worker tls://<scheduler>:8786 --no-dashboard --tls-ca-file {folder}/ca.pem "
          f"--tls-cert {folder}/worker.pem --tls-key {folder}/worker-key.pem\n"
          f"grading:   python -m autograder.grade <assignment> --scheduler tls://<scheduler>:8786 --tls-ca-file "
          f"{folder}/ca.pem --tls-cert {folder}/client.pem --tls-key {folder}/client-key.pem")
    return 0


if __name__ == "__main__":
    sys.exit(main())
