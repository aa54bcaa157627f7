"""A throw-away certificate authority for serving the API emulator over HTTPS.

Tests of TLS verification need a CA the client trusts and a server certificate for
``127.0.0.1``; generating them with the ``openssl`` CLI keeps the sandbox free of crypto
libraries. Keys are unencrypted and short-lived: for tests and the demo only.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


class TlsToolError(RuntimeError):
    """``openssl`` is missing or failed; the message says which step."""


@dataclass(frozen=True, slots=True)
class TestCa:
    ca_cert: str
    cert: str
    key: str

    @property
    def server_tls(self) -> tuple[str, str]:
        """The ``tls=`` argument of :class:`osc_gitops_sandbox.kubeapi.server.KubeApiServer`."""
        return (self.cert, self.key)


TestCa.__test__ = False  # type: ignore[attr-defined]  # not a pytest test class


def make_test_ca(
    directory: str | Path, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"), days: int = 2
) -> TestCa:
    """Create ``ca.crt``, ``server.crt`` and ``server.key`` in ``directory``."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TlsToolError("openssl is not installed: cannot create a test CA for HTTPS")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    san = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
    ext = d / "server.ext"
    ext.write_text(
        f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    steps = [
        [
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            str(days),
            "-subj",
            "/CN=osc-gitops sandbox CA",
        ],
        [
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            f"/CN={hosts[0]}",
        ],
        [
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            str(days),
            "-extfile",
            "server.ext",
        ],
    ]
    for args in steps:
        result = subprocess.run(
            [openssl, *args], cwd=d, capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise TlsToolError(f"openssl {args[0]} failed in {d}: {result.stderr.strip()}")
    return TestCa(str(d / "ca.crt"), str(d / "server.crt"), str(d / "server.key"))
