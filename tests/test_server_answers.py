"""What the plugin reads of an answer besides its body, in-process: the server's Warning headers read
as client-go reads them (``_sources/server_warnings.py``) and shown as kubectl shows them, once each
and escaped; a gzip-coded body decoded within the answer's bound (``_sources/wire.gunzipped``).
Against the real kube-apiserver and kubectl: ``test_real_proxies.py``."""

from __future__ import annotations

import gzip
import io
import zlib

import pytest

from kubectl_kvdtype._kits.env import Environment
from kubectl_kvdtype._sources import server_warnings, wire


@pytest.mark.parametrize("header, texts", [
    ('299 - "v1 is deprecated"', ["v1 is deprecated"]),
    ('299 - "a \\"quoted\\" word", 299 - "second" "Mon, 07 Dec 2026 12:00:00 GMT", 299 - "third"',
     ['a "quoted" word', "second", "third"]),
    ('199 - "not kubectl\'s", 299 kube-apiserver "shown"', ["shown"]),
    ('299 - "kept", garbage, 299 - "after the garbage"', ["kept"]),  # a malformed one ends the reading
    ('299 - ""', []),
    ('299 - "unterminated', []),
    ('299 - "control \x07 character"', []),  # Go's IsControl: dropped whole
    ("299 - \"caf\xc3\xa9\"", ["café"]),  # UTF-8 read as Latin-1 off the wire
    ('2999 - "four digits"', []),
    ('299 "no agent"', []),
])
def test_a_warning_header_is_read_as_client_go_reads_it(header, texts):
    assert server_warnings.texts(header) == texts


def test_each_warning_is_shown_once_per_run_and_escaped():
    stderr = io.StringIO()
    env = Environment(stderr=stderr)
    server_warnings.forget()
    off_the_wire = '299 - "deprecated \u202e", 299 - "other"'.encode().decode("latin-1")  # headers are Latin-1
    server_warnings.heard(off_the_wire, env.warn)
    server_warnings.heard('299 - "other"', env.warn)
    assert stderr.getvalue() == "Warning: deprecated \\u202e\nWarning: other\n"
    assert server_warnings.count() == 2
    assert server_warnings.received() == "2 warnings received (--warnings-as-errors)"
    server_warnings.forget()
    assert server_warnings.count() == 0


def test_a_gzip_coded_body_is_decoded_and_bounded():
    body = b'{"kind":"List","items":[]}' * 1000
    assert wire.gunzipped(gzip.compress(body)) == body
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    coded = bomb.compress(b"\0" * (8 << 20)) + bomb.flush()  # 8 MiB of zeros in ~8 kB
    with pytest.raises(wire.Broken, match="holds more than"):
        wire.gunzipped(coded, limit=4 << 20)
    assert len(wire.gunzipped(coded, limit=8 << 20)) == 8 << 20
    with pytest.raises(wire.Broken, match="does not decode"):
        wire.gunzipped(b"not gzip at all")
    with pytest.raises(wire.Broken, match="ends before its data does"):
        wire.gunzipped(gzip.compress(body)[:-20])
