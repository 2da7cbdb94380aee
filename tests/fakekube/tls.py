"""Test-only TLS material, and the server side of the handshake (SNI, client certificates)."""
from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any, Optional

# Test-only TLS material (EC P-256, valid 2025-2125): a CA and a leaf for IP 127.0.0.1 /
# localhost.  kubectl sends credentials (token, exec plugin) only over https, so the fake
# serves TLS by default; kubeconfigs carry the CA as certificate-authority-data.
TEST_CA_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBajCCARCgAwIBAgICEAAwCgYIKoZIzj0EAwIwGzEZMBcGA1UEAwwQZmFrZWt1
YmUtdGVzdC1jYTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowGzEZ
MBcGA1UEAwwQZmFrZWt1YmUtdGVzdC1jYTBZMBMGByqGSM49AgEGCCqGSM49AwEH
A0IABNmF3xP2Qikb0FpAQfV8rdI3GA0GZNfC3BMmF6rwO20o7NHLi2k71bIF1YNk
G50nLFN/ptyUV3RhcPxJPj6ZTfWjQjBAMA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0P
AQH/BAQDAgEGMB0GA1UdDgQWBBQ7YBZDnXaKtU0jC6P1T7FXNI0sBDAKBggqhkjO
PQQDAgNIADBFAiA5FeRGcpObJmQmdDD79xBK9Dg7bqzNJ0Grrddk+1UR/gIhAJCR
QoMlFMLQ1Qo8jreZsqUl95WdoVmEiL5xs9/LkcrL
-----END CERTIFICATE-----
"""
TEST_CERT_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgICEAEwCgYIKoZIzj0EAwIwGzEZMBcGA1UEAwwQZmFrZWt1
YmUtdGVzdC1jYTAgFw0yNTAxMDEwMDAwMDBaGA8yMTI1MDEwMTAwMDAwMFowEzER
MA8GA1UEAwwIZmFrZWt1YmUwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATOM0Zj
BSx1MDv2dS9loBrUTuNsT5oSp918tlDfnuOClmuPIbgFqpZRgZjBl9YT2t1D0PWr
g4wsNz+JedrSe5bno4GSMIGPMAwGA1UdEwEB/wQCMAAwDgYDVR0PAQH/BAQDAgWg
MBMGA1UdJQQMMAoGCCsGAQUFBwMBMB0GA1UdDgQWBBSedjzX7L8WbwrriaJubSOi
ZXocbjAfBgNVHSMEGDAWgBQ7YBZDnXaKtU0jC6P1T7FXNI0sBDAaBgNVHREEEzAR
hwR/AAABgglsb2NhbGhvc3QwCgYIKoZIzj0EAwIDSAAwRQIgMv2RHtf6rM+lNkSw
ImIetOQZfrewCUBh5+7zLK1Cn3kCIQD2iu8FIqVFAq9VOjfqlJzTkme5NnGSLjWF
2U3epoIKvg==
-----END CERTIFICATE-----
"""
TEST_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg17MEKdbOSU5Y69KJ
gLS+Xnz0mY12nWELlZC3MS3MSYihRANCAATOM0ZjBSx1MDv2dS9loBrUTuNsT5oS
p918tlDfnuOClmuPIbgFqpZRgZjBl9YT2t1D0PWrg4wsNz+JedrSe5bn
-----END PRIVATE KEY-----
"""


# Test-only client-certificate material (EC P-256, valid 2025-2125): a client CA the fake trusts
# for client certificates (like kube-apiserver's --client-ca-file) and a client certificate
# (CN=ci-bot, O=ci) signed by it.  A verified client certificate authenticates a request.
TEST_CLIENT_CA_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBbTCCARSgAwIBAgICIAAwCgYIKoZIzj0EAwIwHTEbMBkGA1UEAwwSZmFrZWt1
YmUtY2xpZW50LWNhMCAXDTI1MDEwMTAwMDAwMFoYDzIxMjUwMTAxMDAwMDAwWjAd
MRswGQYDVQQDDBJmYWtla3ViZS1jbGllbnQtY2EwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAS/ayt1VIWSuYhXue+7NWLs7bs61oA6XbOkcwUHYC2eHaZoFg2qH3wk
8dZekpqKEzqSJIcnhNtVjT4JFCYH6NPZo0IwQDAPBgNVHRMBAf8EBTADAQH/MA4G
A1UdDwEB/wQEAwIBBjAdBgNVHQ4EFgQUfnvTNSh13spiKOJY7UniZAKKZe0wCgYI
KoZIzj0EAwIDRwAwRAIgTkGWsyWlMW2gNu0abPgyeIuT39TUPgGFGxGAgN8fKsEC
IEuLLgtws+RdjGrUhrBNj3JajKHmd0PXd54u4O/3MIwp
-----END CERTIFICATE-----
"""
TEST_CLIENT_CERT_PEM = """\
-----BEGIN CERTIFICATE-----
MIIBgzCCASmgAwIBAgICIAEwCgYIKoZIzj0EAwIwHTEbMBkGA1UEAwwSZmFrZWt1
YmUtY2xpZW50LWNhMCAXDTI1MDEwMTAwMDAwMFoYDzIxMjUwMTAxMDAwMDAwWjAe
MQswCQYDVQQKDAJjaTEPMA0GA1UEAwwGY2ktYm90MFkwEwYHKoZIzj0CAQYIKoZI
zj0DAQcDQgAE6vwPwYCB82qumeSsTu/nwoYFl6f+wGUW8Z/PX31Ej/wGlsR4yfqf
Qxi2UPTrQ+QXI90MULkAPo2fbh0FM3r/tKNWMFQwDAYDVR0TAQH/BAIwADAOBgNV
HQ8BAf8EBAMCB4AwEwYDVR0lBAwwCgYIKwYBBQUHAwIwHwYDVR0jBBgwFoAUfnvT
NSh13spiKOJY7UniZAKKZe0wCgYIKoZIzj0EAwIDSAAwRQIgIHCarT0f8cdSYeif
JPvJLk2cuosLqeVHMkhLTVWKRioCIQDdVqrJHoduDxkcJkSYR5whKu5yZ6ATzMzW
zTKfEF18fw==
-----END CERTIFICATE-----
"""
TEST_CLIENT_KEY_PEM = """\
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgYOAmWxiI46XESRd/
2jEWHFnJoNhwGYQLKYfm7jImysuhRANCAATq/A/BgIHzaq6Z5KxO7+fChgWXp/7A
ZRbxn89ffUSP/AaWxHjJ+p9DGLZQ9OtD5Bcj3QxQuQA+jZ9uHQUzev+0
-----END PRIVATE KEY-----
"""


def _server_ssl_context() -> ssl.SSLContext:
    """The server certificate; client certificates are asked for and, when sent, verified against
    the client CA (a handshake with an untrusted one fails, as with kube-apiserver)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.load_verify_locations(cadata=TEST_CLIENT_CA_PEM)
    ctx.sni_callback = _remember_sni
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(TEST_CERT_PEM + TEST_KEY_PEM)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)
    return ctx


def _remember_sni(conn: Any, server_name: Optional[str], ctx: ssl.SSLContext) -> None:
    conn.fake_sni = server_name  # read back per request (RequestRecord.sni)


def _peer_common_name(conn: Any) -> Optional[str]:
    try:
        cert = conn.getpeercert()
    except (AttributeError, ValueError):
        return None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None
