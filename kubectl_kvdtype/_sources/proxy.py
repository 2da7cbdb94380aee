"""Which proxy a request to the API server goes through, or none: kubectl's rules, which are Go's.

client-go uses the cluster's ``proxy-url`` (``--proxy-url`` replaces it) for every request, loopback
included; without one, Go's ``net/http.ProxyFromEnvironment``, whose rules are
``golang.org/x/net/http/httpproxy``'s, restated here:

- an https server's proxy is ``HTTPS_PROXY``, else ``https_proxy``; an http server's ``HTTP_PROXY``,
  else ``http_proxy`` (the upper case wins; an empty value counts as unset), which is refused
  where ``REQUEST_METHOD`` is set (a CGI program, whose client could set it); ``ALL_PROXY`` is
  never read;
- a proxy without a scheme (``proxy:3128``) is ``http://``; one that does not parse is no proxy;
- ``localhost`` (spelled so) and a loopback address are never proxied;
- ``NO_PROXY``, else ``no_proxy``: comma-separated, blanks trimmed, case ignored; ``*`` matches every
  host; a CIDR (``10.0.0.0/8``) or an IP address (``10.1.2.3``, ``[::1]:6443``) matches an address
  (with the port, when given); a name matches itself and its subdomains (``example.com``), a
  leading dot (``.example.com``) or ``*.`` only the subdomains, each with the port when given.

Go parses URLs with ``net/url``, whose rules differ from ``urllib.parse``'s where it matters here
(``LOCALHOST`` keeps its case, a port must be digits, a bad host is an error): ``_GoURL`` reads a
URL as it does. ``tests/test_proxy_rules.py`` holds every answer equal to Go's own, run through
a Go program of the tests (``tests/proxyoracle``) on a generated corpus.
"""

from __future__ import annotations

import re
from typing import Mapping, Optional

from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.secrets import without_password
from kubectl_kvdtype._kits.status import KvdtypeError

#: The schemes the plugin's transport reaches a server through (client-go's and Go's alike).
SCHEMES = ("http", "https", "socks5")
#: A proxy's port when its URL gives none (Go's ``net/http``).
DEFAULT_PORTS = {"http": 80, "https": 443, "socks5": 1080, "socks5h": 1080}
#: Where a request URL's port defaults from, for ``NO_PROXY``'s ports (httpproxy's ``portMap``).
_REQUEST_PORTS = {"http": "80", "https": "443", "socks5": "1080"}


@record_type(frozen=True)
class Proxy:
    """A proxy chosen for a server: its URL read as Go reads it, and where it was set."""

    scheme: str
    hostname: str
    #: As written ("" when the URL gives none: ``address`` then has the scheme's default).
    port: str
    #: The URL's user and password, percent-decoded; None: not given (an empty one is given).
    username: Optional[str]
    password: Optional[str]
    #: Where it was set: ``HTTPS_PROXY``, ``https_proxy``..., ``proxy-url``, ``--proxy-url``.
    source: str
    #: As written, for messages (``shown``).
    url: str

    @property
    def address(self) -> tuple[str, int]:
        """Where to connect: the host and the port (the scheme's default when none is given)."""
        return self.hostname, int(self.port) if self.port else DEFAULT_PORTS.get(self.scheme, 80)

    @property
    def shown(self) -> str:
        """The proxy as messages name it: its URL's password hidden, where it was set, and host:port
        when the URL does not say it."""
        written = without_password(self.url)
        return f"{written} ({self.source})" if self.where in written else f"{written} ({self.source}, {self.where})"

    @property
    def where(self) -> str:
        """host:port of the proxy (an IPv6 address in brackets), as kubectl's errors name it."""
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    @property
    def whole_url(self) -> str:
        """The URL with its scheme and port spelled out (``proxy:3128`` is ``http://proxy:3128``)."""
        from urllib.parse import quote

        user = "" if self.username is None else quote(self.username, safe="") + (
            "" if self.password is None else ":" + quote(self.password, safe="")) + "@"
        return f"{self.scheme}://{user}{self.where}"

    def authorization(self) -> Optional[str]:
        """``Proxy-Authorization`` as Go sends it: Basic of the URL's user and password, when it has a user."""
        if self.username is None:
            return None
        import base64

        pair = f"{self.username}:{self.password or ''}".encode("utf-8", "surrogateescape")
        return "Basic " + base64.b64encode(pair).decode("ascii")


def for_server(server: str, environ: Mapping[str, str], proxy_url: Optional[str] = None) -> Optional[Proxy]:
    """The proxy requests to ``server`` go through, or None (direct). ``proxy_url``: the cluster's
    ``proxy-url`` (or ``--proxy-url``), used for every request, as client-go uses it; refused in a
    sentence (exit 3) when it is no URL of ``SCHEMES``."""
    if proxy_url:
        return configured(proxy_url, "proxy-url")
    return from_environment(environ, server)


def configured(value: str, source: str) -> Proxy:
    """A ``proxy-url`` setting as client-go reads it: a URL of ``SCHEMES`` (no scheme is no proxy URL)."""
    parsed = _GoURL.parse(value)
    if parsed is None or parsed.scheme not in SCHEMES:  # kubectl's words
        shown = without_password(value)
        why = (f"could not parse: {shown}" if parsed is None else
               f'unsupported scheme "{parsed.scheme}", must be {", ".join(SCHEMES[:-1])}, or {SCHEMES[-1]}')
        raise KvdtypeError(f"invalid '{source}' \"{shown}\": {why}")
    return parsed.proxy(source, value)


def from_environment(environ: Mapping[str, str], url: str) -> Optional[Proxy]:
    """The proxy of the environment for a request to ``url``, as ``httpproxy.FromEnvironment`` picks it."""
    target = _GoURL.parse(url)
    if target is None:
        return None
    if target.scheme == "https":
        source = _first_set(environ, "HTTPS_PROXY", "https_proxy")
    elif target.scheme == "http":
        source = _first_set(environ, "HTTP_PROXY", "http_proxy")
    else:
        return None
    proxy = _parsed_proxy(environ[source], source) if source else None
    if proxy is None:
        return None
    if target.scheme == "http" and environ.get("REQUEST_METHOD"):
        raise KvdtypeError(f"{source} is not used where REQUEST_METHOD is set (a CGI program's, which its client "
                           f"could set), as kubectl refuses it: unset REQUEST_METHOD, or reach {url} over https")
    no_proxy = environ.get(_first_set(environ, "NO_PROXY", "no_proxy") or "", "")
    return proxy if _use_proxy(target, no_proxy) else None


def target_of(url: str) -> tuple[str, int]:
    """The host and port a proxy is asked to connect to for ``url``, as Go's ``canonicalAddr`` names
    them: the host as written (its case kept; punycode for a non-ASCII name), the scheme's port by default."""
    parsed = _GoURL.parse(url)
    if parsed is None or not parsed.hostname:
        raise ValueError(f"no host in {url}")
    return _idna(parsed.hostname), int(parsed.port or _REQUEST_PORTS.get(parsed.scheme, "443"))


def _first_set(environ: Mapping[str, str], *names: str) -> Optional[str]:
    return next((name for name in names if environ.get(name)), None)


def _parsed_proxy(value: str, source: str) -> Optional[Proxy]:
    """httpproxy's ``parseProxy``: the URL, or ``http://`` and it when that has no scheme or host."""
    parsed = _GoURL.parse(value)
    if parsed is None or not parsed.scheme or not parsed.host:
        parsed = _GoURL.parse("http://" + value) or parsed
    return parsed.proxy(source, value) if parsed is not None else None


# --- NO_PROXY and loopback (httpproxy's useProxy) -------------------------------------------------

def _use_proxy(target: _GoURL, no_proxy: str) -> bool:
    host = _idna(target.hostname)
    port = target.port or _REQUEST_PORTS.get(target.scheme, "")
    if host == "localhost":
        return False
    address = _address(host)
    if address is not None and address.is_loopback_go:
        return False
    name = host.strip().lower()
    for entry in no_proxy.split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return False
        if _matches(entry, name, port, address):
            return False
    return True


def _matches(entry: str, host: str, port: str, address: Optional[_Address]) -> bool:
    """Whether one ``NO_PROXY`` entry (trimmed, lower case) matches the request's host and port."""
    if "/" in entry:
        network = _network(entry)
        if network is not None:
            return address is not None and network.holds(address)
    split = _split_host_port(entry)
    entry_host, entry_port = split if split is not None else (entry, "")
    entry_address = _address(entry_host, zone=False)
    if entry_address is not None:
        return address is not None and entry_address.same(address) and entry_port in ("", port)
    if not entry_host:
        return False
    if entry_host.startswith("*."):
        entry_host = entry_host[1:]
    whole = not entry_host.startswith(".")
    suffix = _idna("." + entry_host if whole else entry_host)
    if address is not None:
        return False
    return (host.endswith(suffix) or (whole and host == suffix[1:])) and entry_port in ("", port)


class _Address:
    """An IP address as Go's ``net.IP`` holds one: 4 bytes, or 16 (an IPv4-mapped one among them)."""

    __slots__ = ("packed",)

    def __init__(self, packed: bytes) -> None:
        self.packed = packed

    @property
    def v4(self) -> Optional[bytes]:
        """``net.IP.To4``: the IPv4 address of 4 bytes or of an IPv4-mapped 16."""
        if len(self.packed) == 4:
            return self.packed
        return self.packed[12:] if self.packed[:12] == _V4_IN_V6 else None

    @property
    def is_loopback_go(self) -> bool:
        v4 = self.v4
        return v4[0] == 127 if v4 is not None else self.packed == bytes(15) + b"\x01"

    def same(self, other: _Address) -> bool:
        """``net.IP.Equal``: an IPv4 address equals its IPv4-mapped form."""
        return (self.v4 or self.packed) == (other.v4 or other.packed)


_V4_IN_V6 = bytes(10) + b"\xff\xff"


class _Network:
    """A CIDR as ``net.ParseCIDR`` makes it, matched as ``net.IPNet.Contains`` matches."""

    __slots__ = ("network", "mask")

    def __init__(self, network: bytes, mask: bytes) -> None:
        self.network, self.mask = network, mask

    def holds(self, address: _Address) -> bool:
        network, mask = self.network, self.mask
        if len(network) == 16 and network[:12] == _V4_IN_V6:
            network = network[12:]
        if len(network) == 4 and len(mask) == 16:
            mask = mask[12:]
        ip = address.v4 or address.packed
        if len(ip) != len(network) or len(mask) != len(network):
            return False
        return all((i & m) == (n & m) for i, m, n in zip(ip, mask, network, strict=True))


def _network(entry: str) -> Optional[_Network]:
    text, _, bits = entry.partition("/")
    address = _address(text, zone=False)
    if address is None or not bits.isdigit() or not bits.isascii():
        return None
    width = 8 * len(address.packed)
    if int(bits) > width:
        return None
    mask = ((1 << width) - 1) ^ ((1 << (width - int(bits))) - 1)
    mask_bytes = mask.to_bytes(len(address.packed), "big")
    ip = address.packed
    if len(mask_bytes) == 4 and len(ip) == 16 and ip[:12] == _V4_IN_V6:
        ip = ip[12:]
    return _Network(bytes(i & m for i, m in zip(ip, mask_bytes, strict=True)), mask_bytes)


def _address(text: str, zone: bool = True) -> Optional[_Address]:
    """An IP address as Go parses one (``netip.ParseAddr``, a zone allowed; ``net.ParseIP`` without):
    dotted IPv4 without leading zeros, or IPv6; None for anything else."""
    if zone and "%" in text:
        text, _, scope = text.partition("%")
        if not scope or ":" not in text:
            return None
    if not text or not set(text) <= _IP_CHARACTERS:
        return None
    import ipaddress  # only for an address: a name never pays for it

    try:
        parsed = ipaddress.ip_address(text)
    except ValueError:
        return None
    return _Address(parsed.packed)


_DIGITS = "0123456789"
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_IP_CHARACTERS = frozenset(_DIGITS + "abcdefABCDEF.:")


def _split_host_port(text: str) -> Optional[tuple[str, str]]:
    """Go's ``net.SplitHostPort`` (any port text; None where it fails)."""
    colon = text.rfind(":")
    if colon < 0:
        return None
    start, end = 0, 0
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or close + 1 != colon:
            return None
        host = text[1:close]
        start, end = 1, close + 1
    else:
        host = text[:colon]
        if ":" in host:
            return None
    if "[" in text[start:] or "]" in text[end:]:
        return None
    return host, text[colon + 1:]


def _idna(host: str) -> str:
    """A non-ASCII name in its ASCII form (punycode), as Go's ``idna.Lookup`` gives it; kept where it has none."""
    if host.isascii():
        return host
    from encodings import idna  # a label at a time: an empty one (a leading dot) stays, as Go's keeps it

    try:
        return ".".join(idna.ToASCII(label).decode("ascii") if label else "" for label in host.split("."))
    except UnicodeError:
        return host


# --- URLs as Go's net/url reads them ---------------------------------------------------------------

class _GoURL:
    """What the proxy rules read of a URL: its scheme, host (with its port, unescaped, an IPv6
    address in brackets), user and password."""

    __slots__ = ("scheme", "host", "username", "password")

    def __init__(self, scheme: str, host: str, username: Optional[str], password: Optional[str]) -> None:
        self.scheme, self.host, self.username, self.password = scheme, host, username, password

    @classmethod
    def parse(cls, raw: str) -> Optional[_GoURL]:
        """``url.Parse``'s reading of what the proxy rules use (scheme, user, host), None where it errs."""
        raw, _, fragment = raw.partition("#")
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw) or _unescape(fragment) is None:
            return None
        scheme, rest = _scheme(raw)
        if scheme is None:
            return None
        rest = rest.partition("?")[0]
        if not rest.startswith("/"):
            if scheme:
                return cls(scheme, "", None, None)  # an opaque URL (``proxy:3128``): no host
            if ":" in rest.partition("/")[0] or _unescape(rest) is None:
                return None
            return cls("", "", None, None)
        authority, path = ("", rest) if not rest.startswith("//") else rest[2:].partition("/")[::2]
        if _unescape(path) is None:
            return None
        if not rest.startswith("//"):
            return cls(scheme, "", None, None)
        at = authority.rfind("@")
        host = _host(scheme, authority[at + 1:])
        if host is None:
            return None
        if at < 0:
            return cls(scheme, host, None, None)
        userinfo = authority[:at]
        if not set(userinfo) <= _USERINFO:
            return None
        user, colon, password = userinfo.partition(":")
        username, secret = _unescape(user), _unescape(password) if colon else None
        if username is None or (colon and secret is None):
            return None
        return cls(scheme, host, username, secret)

    @property
    def hostname(self) -> str:
        return _host_port(self.host)[0]

    @property
    def port(self) -> str:
        return _host_port(self.host)[1]

    def proxy(self, source: str, written: str) -> Proxy:
        return Proxy(self.scheme, self.hostname, self.port, self.username, self.password, source, written)


_SCHEME_START = frozenset(_LETTERS)
_SCHEME_REST = frozenset(_LETTERS + _DIGITS + "+-.")
_USERINFO = frozenset(_LETTERS + _DIGITS + "-._:~!$&'()*+,;=%@")
#: What a host may hold besides non-ASCII and percent escapes (``shouldEscape`` for a host).
_HOST = frozenset(_LETTERS + _DIGITS + "!$&'()*+,;=:[]<>\"-_.~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _scheme(raw: str) -> tuple[Optional[str], str]:
    """``getScheme``: ("", raw) when there is none, (None, "") for a URL starting with a colon."""
    for i, c in enumerate(raw):
        if c == ":":
            return (raw[:i].lower(), raw[i + 1:]) if i else (None, "")
        if c not in (_SCHEME_REST if i else _SCHEME_START):
            return "", raw
    return "", raw


def _host(scheme: str, host: str) -> Optional[str]:
    """``parseHost``: the host and port unescaped, None where Go refuses them."""
    bracket = host.rfind("[")
    if bracket > 0:
        return None
    if bracket == 0:
        close = host.rfind("]")
        if close < 0 or not _optional_port(host[close + 1:]):
            return None
        inside = host[1:close]
        zone = inside.find("%25")
        address = _unescape_host(inside[:zone] if zone >= 0 else inside)
        if address is None:
            return None
        text = address + (_unescape(inside[zone:]) or "" if zone >= 0 else "")
        parsed = _address(text)
        if parsed is None or len(parsed.packed) == 4:
            return None
        return "[" + text + "]" + host[close + 1:]
    colon = host.find(":")
    if colon >= 0:
        if host.rfind(":") != colon and scheme not in ("http", "https"):
            colon = host.rfind(":")
        if not _optional_port(host[colon:]):
            return None
    return _unescape_host(host)


def _optional_port(text: str) -> bool:
    return text == "" or (text[0] == ":" and all(c in _DIGITS for c in text[1:]))


def _host_port(host: str) -> tuple[str, str]:
    """``URL.Hostname`` and ``URL.Port``: a port only when it is digits."""
    name, port = host, ""
    colon = host.rfind(":")
    if colon >= 0 and _optional_port(host[colon:]):
        name, port = host[:colon], host[colon + 1:]
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    return name, port


def _unescape_host(text: str) -> Optional[str]:
    """A host unescaped: only non-ASCII bytes (and ``%25``) may be escaped, and only ``_HOST`` is plain."""
    for i, c in enumerate(text):
        if c == "%":
            escape = text[i:i + 3]
            if not _ESCAPE.fullmatch(escape) or (int(escape[1], 16) < 8 and escape != "%25"):
                return None
        elif c.isascii() and c not in _HOST:
            return None
    return _unescape(text)


def _unescape(text: str) -> Optional[str]:
    """Percent escapes decoded (UTF-8); None for a ``%`` without two hex digits."""
    if text.count("%") != len(_ESCAPE.findall(text)):
        return None
    data = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16) + 0xDC00) if int(m.group(1), 16) >= 0x80
                       else chr(int(m.group(1), 16)), text)
    # Escaped bytes of 0x80 and above became lone surrogates: joined with the plain text as UTF-8.
    return data.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
