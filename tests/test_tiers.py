"""The two tiers hold: e2e fixtures mark a test e2e, and the fast tier cannot leave the process."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from conftest import _FastTierGuard


def test_the_fast_tier_refuses_a_socket_and_a_subprocess(request):
    assert request.node.get_closest_marker("e2e") is None
    with pytest.raises(RuntimeError, match="is not marked e2e"):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
    with pytest.raises(RuntimeError, match="is not marked e2e"):
        subprocess.run([sys.executable, "-c", "pass"], check=False)
    assert _FastTierGuard.events == ["socket.bind", "subprocess.Popen"]
    _FastTierGuard.events.clear()  # refused as intended: do not fail this test for it


def test_a_test_using_the_fake_api_server_is_e2e(request, fake):
    assert request.node.get_closest_marker("e2e") is not None
    assert fake.url.startswith("https://127.0.0.1:")
