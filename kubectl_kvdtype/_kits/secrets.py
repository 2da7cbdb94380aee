"""Secrets kept out of what is shown, and values no HTTP header may carry.

One place for the rules the command line (a typed ``--token``), the cluster source (a kubeconfig's
or an exec plugin's token, a server URL with a password) and error messages share.
"""

from __future__ import annotations

import re
from typing import Sequence

#: Credentials however they reach a message: an Authorization header's value, and the password
#: of a URL's userinfo (``https://admin:PW@host``, shown ``admin:***`` as kubectl does).
_CREDENTIAL_TEXT = ((re.compile(r"\b(Bearer|Basic)\s+[^\s'\"]+"), r"\1 <redacted>"),
                    (re.compile(r"(://[^/@\s:]*):[^/@\s]*@"), r"\1:***@"))


def redact(text: str, secrets: Sequence[str]) -> str:
    """``text`` without the ``secrets`` typed on the command line, any Authorization value, and
    any password in a URL: what an error message or a debug traceback may show."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "<redacted>")
    for pattern, replacement in _CREDENTIAL_TEXT:
        text = pattern.sub(replacement, text)
    return text


def without_password(url: str) -> str:
    """A URL as messages show it: userinfo as ``user:***`` (kubectl's way), the rest unchanged."""
    return _CREDENTIAL_TEXT[1][0].sub(_CREDENTIAL_TEXT[1][1], url)


#: What a refused header value holds, said once for every place that refuses one (a flag, a
#: kubeconfig setting, a plugin's token); the value itself is never shown.
HEADER_REFUSAL = "a line break (CR or LF), a NUL or a character beyond Latin-1, which no HTTP header may carry"


def breaks_header(value: object) -> bool:
    """Whether a value cannot be sent as an HTTP header value: a CR, LF or NUL would end the
    header (or the request) early, so it is refused, as kubectl refuses it; a character beyond
    Latin-1 cannot be encoded into a header at all (the HTTP client would fail mid-request)."""
    return isinstance(value, str) and (any(c in value for c in "\r\n\0") or any(ord(c) > 0xFF for c in value))
