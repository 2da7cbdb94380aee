"""What the plugin reads of an answer besides its body, in-process: the server's Warning headers read
as client-go reads them (``_sources/server_warnings.py``) and shown as kubectl shows them, once each
and escaped; a gzip-coded body decoded within the answer's bound (``_sources/wire.gunzip_pieces``).
Against the real kube-apiserver and kubectl: ``test_real_proxies.py``."""

from __future__ import annotations

import gzip
import io
import json
import zlib

import pytest

from _support import EXAMPLES, documents, in_process, kvdtype, seed
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


def _gunzipped(data: bytes, limit: int = wire.MAX_BODY) -> bytes:
    """``data`` decoded as one piece, as a body read whole is."""
    return b"".join(wire.gunzip_pieces(iter((data,)), limit))


def test_a_gzip_coded_body_is_decoded_and_bounded():
    body = b'{"kind":"List","items":[]}' * 1000
    assert _gunzipped(gzip.compress(body)) == body
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    coded = bomb.compress(b"\0" * (8 << 20)) + bomb.flush()  # 8 MiB of zeros in ~8 kB
    with pytest.raises(wire.Broken, match="holds more than"):
        _gunzipped(coded, limit=4 << 20)
    assert len(_gunzipped(coded, limit=8 << 20)) == 8 << 20
    with pytest.raises(wire.Broken, match="does not decode"):
        _gunzipped(b"not gzip at all")
    with pytest.raises(wire.Broken, match="ends before its data does"):
        _gunzipped(gzip.compress(body)[:-20])


# --- On the wire, against the fake: once per run, --warnings-as-errors, a write finished first --------

def test_the_server_s_warnings_are_shown_once_and_end_a_strict_run(fake, kube_env):
    seed(fake, documents(EXAMPLES))
    fake.warn('policy "x" says: mind the "dtype"', times=None)  # on every answer
    shown = kvdtype(kube_env, "check", "-A")
    assert shown.returncode == 1 and shown.stderr == 'Warning: policy "x" says: mind the "dtype"\n', shown.stderr
    strict = kvdtype(kube_env, "check", "-A", "--warnings-as-errors", "-o", "json")
    assert strict.returncode == 3 and json.loads(strict.stdout)["items"]  # its reads all sent: written, as kubectl
    assert strict.stderr.splitlines() == ['Warning: policy "x" says: mind the "dtype"',
                                          "error: 1 warning received (--warnings-as-errors)"]
    fake.clear_faults()
    assert kvdtype(kube_env, "check", "-A", "--warnings-as-errors").returncode == 1  # no warning: as ever


def test_a_warned_write_is_finished_and_journaled_before_a_strict_run_ends(fake, kube_env, tmp_path, monkeypatch):
    """escape rebind with --warnings-as-errors: the write the server warned about (step 4, the
    recreated deployment) is done and journaled; the run ends before step 5, saying how to resume."""
    seed(fake, documents(EXAMPLES / "team-a.yaml") + [d for d in documents(EXAMPLES / "team-b.yaml")
                                                      if d["kind"] in ("Setting", "KVCachePool")])
    fake.warn("spec.kvCache.connector is deprecated", method="POST", path=r"/modeldeployments$")
    monkeypatch.chdir(tmp_path)
    code, _, err = in_process(["escape", "rebind", "legacy", "-n", "team-a", "--dtype", "bfloat16", "--apply",
                               "--warnings-as-errors"], kube_env)
    assert code == 3, err
    assert "Warning: spec.kvCache.connector is deprecated\n" in err
    last = err.splitlines()[-1]
    assert last.startswith("error: step 5 of ") and "1 warning received (--warnings-as-errors)" in last
    assert "to resume from step 5" in last
    (journal,) = tmp_path.glob("kvdtype-backup-*/journal.json")
    assert len(json.loads(journal.read_text())["done"]) == 4
