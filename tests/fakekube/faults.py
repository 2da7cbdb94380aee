"""What tests inject: errors and delays, RBAC denials, expired continue tokens, admission hooks,
a server that falls silent mid-run (``fall_silent``), a body sent a byte at a time (``dribble``),
an answer in place of the real one (``answer``), a LIST whose continue token never ends
(``loop_continue``); and ``HangingServer``, a socket that accepts and never answers.
"""
from __future__ import annotations

import json
import math
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from .resources import JSON, ApiError, Key, _details, find_type
from .wire import _decode_continue, _encode_continue, _Target

EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


@dataclass
class _Rule:
    status: Optional[int]
    method: Optional[str]
    path: Optional[re.Pattern[str]]
    times: Optional[int]
    delay: float = 0.0
    retry_after: Optional[float] = None
    message: Optional[str] = None
    reason: Optional[str] = None
    #: Matching requests still answered as usual before the rule applies (``fail(after=N)``).
    after: int = 0
    answer: Optional[bytes] = None  # a 200 body served instead of the real answer
    pace: float = 0.0  # seconds between the bytes of the body
    body: Optional[bytes] = None  # the error's body as it is, instead of a Status (``fail(body=...)``)
    warning: Optional[str] = None  # a Warning header's text on the answer (``warn``)

    def matches(self, method: str, path: str) -> bool:
        if self.times is not None and self.times <= 0:
            return False
        if self.method and self.method.upper() != method:
            return False
        return self.path is None or bool(self.path.search(path))

    def error(self) -> ApiError:
        code = self.status or 500
        headers, details = {}, {}
        if self.retry_after is not None:
            seconds = max(0, math.ceil(self.retry_after))  # clients parse integers only
            headers["Retry-After"] = str(seconds)
            details["retryAfterSeconds"] = seconds
        message = self.message or f"injected fault: HTTP {code}"
        error = ApiError(code, message, self.reason, details, headers=headers)
        error.raw = self.body
        return error


class Hold:
    """``fake.hold(...)``: matching requests wait, received but unanswered, until ``release``.

    ``arrived`` is set once the first one is waiting, so that a test acts while a client is
    reliably mid-request; after ``release`` each is served as usual (the write applies, as a real
    server applies a request whose client has gone)."""

    def __init__(self, method: Optional[str], path: Optional[str], times: Optional[int]) -> None:
        self.rule = _Rule(None, method, re.compile(path) if path else None, times)
        self.arrived = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()

    def wait_arrived(self, timeout: float = 30) -> None:
        if not self.arrived.wait(timeout):
            raise AssertionError(f"no request matching the hold arrived within {timeout}s")


@dataclass
class _Silence:
    """``fall_silent``: matching requests still to answer, then no answer to anything."""

    rule: _Rule
    remaining: int
    released: threading.Event

    @property
    def fallen(self) -> bool:
        return self.remaining <= 0


_LOOP_PREFIX = "fake-loop-"


@dataclass
class _Loop:
    """``loop_continue``: the resource it applies to (None: any), and whether each token is new."""

    resource: Optional[str]
    fresh: bool
    served: int = 0


@dataclass(frozen=True)
class _Deny:
    verb: Optional[str]
    group: Optional[str]
    resource: str
    namespace: Optional[str]
    #: Objects the verb stays allowed on (RBAC's resourceNames); a request naming none is denied.
    but: frozenset[str] = frozenset()

    def matches(self, verb: str, group: str, resource: str, namespace: str, name: str = "") -> bool:
        if self.verb not in (None, "*", verb):
            return False
        if name and name in self.but:
            return False
        if self.group is not None and self.group not in ("*", group):
            return False
        if self.resource not in ("*", resource):
            return False
        # A cluster-wide request ("" namespace) needs the permission in every namespace.
        return self.namespace is None or not namespace or self.namespace == namespace


class FaultsMixin:
    """The faults a test has asked for, and where the request path consults them."""

    # -- test helpers: behaviour
    def deny(self, verb: Optional[str], resource: str, namespace: Optional[str] = None,
             group: Optional[str] = None, but: Iterable[str] = ()) -> None:
        """Forbid ``verb`` (None/"*" = any) on ``resource``, except on the objects named ``but``:
        a role granting the verb with ``resourceNames`` (a request or an access review naming no
        object, a LIST or a create, is then denied, as RBAC denies it).

        ``resource``: kind, plural, short name, ``plural.group``, ``"*"`` or ``"plural/status"``.
        """
        base, _, sub = resource.partition("/")
        try:
            rt = find_type(base, group)
            resource, group = rt.plural + (f"/{sub}" if sub else ""), rt.group
        except KeyError:
            pass
        with self._lock:
            self._denies.append(_Deny(verb, group, resource, namespace, frozenset(but)))

    def fail(self, status: int, method: Optional[str] = None, path: Optional[str] = None,
             times: Optional[int] = 1, retry_after: Optional[float] = None,
             delay: float = 0.0, message: Optional[str] = None,
             reason: Optional[str] = None, after: int = 0, body: Optional[bytes] = None) -> None:
        """Answer the next ``times`` (None = all) matching requests with ``status``, once ``after``
        matching requests have been answered as usual (a fault placed by count, not by a clock);
        ``body``: these bytes instead of a Status (a proxy's page, a hostile server's answer)."""
        rule = _Rule(status, method, re.compile(path) if path else None, times, delay,
                     retry_after, message, reason, after, body=body)
        with self._lock:
            self._rules.append(rule)

    def delay(self, seconds: float, method: Optional[str] = None, path: Optional[str] = None,
              times: Optional[int] = 1) -> None:
        """Sleep ``seconds`` before answering the next ``times`` (None = all) matches."""
        with self._lock:
            self._rules.append(_Rule(None, method, re.compile(path) if path else None,
                                     times, seconds))

    def hold(self, method: Optional[str] = None, path: Optional[str] = None, times: Optional[int] = 1) -> Hold:
        """Hold the next ``times`` (None = all) matching requests until the returned ``Hold`` is
        released (or ``clear_faults``/``stop``); see ``Hold``."""
        hold = Hold(method, path, times)
        with self._lock:
            self._holds.append(hold)
        return hold
    def answer(self, body: Any, method: Optional[str] = None, path: Optional[str] = None,
               times: Optional[int] = 1) -> None:
        """Answer the next ``times`` (None = all) matches ``200`` with ``body`` (bytes as they are,
        anything else as JSON: ``{}``, ``None``, ``[]``...), whatever the request asked."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        with self._lock:
            self._rules.append(_Rule(None, method, re.compile(path) if path else None, times, answer=raw))

    def warn(self, text: str, method: Optional[str] = None, path: Optional[str] = None,
             times: Optional[int] = 1) -> None:
        """Answer the next ``times`` (None = all) matches as usual, with a ``Warning: 299 - "TEXT"``
        header, as kube-apiserver warns (a deprecated version, an admission policy's warning)."""
        with self._lock:
            self._rules.append(_Rule(None, method, re.compile(path) if path else None, times, warning=text))

    def dribble(self, seconds_per_byte: float, method: Optional[str] = None, path: Optional[str] = None,
                times: Optional[int] = 1) -> None:
        """Send the body of the next ``times`` (None = all) matching answers one byte at a time,
        ``seconds_per_byte`` apart (the headers at once): no single read waits long, the whole does."""
        with self._lock:
            self._rules.append(_Rule(None, method, re.compile(path) if path else None, times,
                                     pace=seconds_per_byte))

    def loop_continue(self, fresh: bool = False, resource: Optional[str] = None) -> None:
        """Every LIST page of ``resource`` (a plural; None: any) until ``clear_faults`` carries a
        continue token that leads back to the first page: the same token each time, or with
        ``fresh`` a new one each time (a list that never ends)."""
        with self._lock:
            self._loop = _Loop(resource, fresh)

    def fall_silent(self, after: int = 0, method: Optional[str] = None, path: Optional[str] = None) -> None:
        """Answer the next ``after`` requests matching ``method``/``path`` as usual (others too,
        meanwhile), then answer no request at all, of any path, until ``clear_faults`` or ``stop``:
        an API server that wedges mid-run. A silenced request is read and logged, and its
        connection held open with no byte of answer, like ``HangingServer``'s."""
        rule = _Rule(None, method, re.compile(path) if path else None, None)
        with self._lock:
            self._release_silence()
            self._silence = _Silence(rule, after, threading.Event())

    def drop_kept(self, times: int = 1, method: Optional[str] = None, target: Optional[str] = None) -> None:
        """Close the connection of each of the next ``times`` requests (of ``method``, whose
        request target, query included, ``target`` searches; None: any) that arrive on a
        kept-alive connection (one that has carried an answer), with no answer: a server that
        closed a kept connection as the client took it. The request is logged with no status."""
        with self._lock:
            self._drop_kept += [(method, re.compile(target) if target else None)] * times

    @property
    def silent(self) -> bool:
        """Whether ``fall_silent`` has taken effect (its ``after`` requests are answered)."""
        with self._lock:
            return self._silence is not None and self._silence.fallen

    def faults_pending(self) -> int:
        """How many ``fail``/``delay`` rules still apply to a future request (not used up)."""
        with self._lock:
            return sum(1 for rule in self._rules if rule.times is None or rule.times > 0)

    def clear_faults(self) -> None:
        with self._lock:
            for hold in self._holds:
                hold.release()
            self._holds.clear()
            self._rules.clear()
            self._denies.clear()
            self._expire = 0
            self._loop = None
            self._drop_kept.clear()
            self._release_silence()

    def expire_continue(self, times: int = 1) -> None:
        with self._lock:
            self._expire += times

    def admission(self, fn: Callable[[str, Optional[JSON], Optional[JSON]], Optional[str]]
                  ) -> None:
        """Add a validating hook ``fn(op, new, old)``; op is CREATE/UPDATE/DELETE.

        A returned string denies the request with 403 like a webhook would.
        """
        with self._lock:
            self._admission.append(fn)

    def is_allowed(self, verb: str, group: str, resource: str, namespace: str = "", name: str = "") -> bool:
        with self._lock:
            return not any(d.matches(verb, group, resource, namespace, name) for d in self._denies)

    # -- consulted while serving
    def _dropped_kept(self, method: str, kept: bool, target: str) -> bool:
        """Whether ``drop_kept`` takes this request (on a connection that has answered before)."""
        with self._lock:
            taken = next((drop for drop in self._drop_kept if drop[0] in (None, method)
                          and (drop[1] is None or drop[1].search(target))), None) if kept else None
            if taken is None:
                return False
            self._drop_kept.remove(taken)
            return True

    def _release_silence(self) -> None:
        """Silenced requests go on (their clients have given up by then); new ones are answered."""
        if self._silence is not None:
            self._silence.released.set()
            self._silence = None

    def _hold_if_silent(self, method: str, path: str) -> None:
        """Count ``fall_silent``'s answered requests; once it has fallen, hold this one."""
        with self._lock:
            silence = self._silence
            if silence is None:
                return
            if not silence.fallen:
                if silence.rule.matches(method, path):
                    silence.remaining -= 1  # this one is still answered; the next ones are not
                return
        silence.released.wait()

    def _wait_if_held(self, method: str, path: str) -> None:
        with self._lock:
            hold = next((h for h in self._holds if h.rule.matches(method, path)), None)
            if hold is None:
                return
            if hold.rule.times is not None:
                hold.rule.times -= 1
        hold.arrived.set()
        hold.released.wait(60)  # never a thread held past the test

    def _apply_rules(self, method: str, path: str) -> tuple[Optional[bytes], float, list[str]]:
        """Wait while held, sleep the delays, raise the failure; (an answer to serve instead, seconds
        per byte, warnings to send)."""
        self._wait_if_held(method, path)
        failing: Optional[_Rule] = None
        pause, pace = 0.0, 0.0
        warnings: list[str] = []
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, path):
                    continue
                if rule.after > 0:
                    rule.after -= 1
                    continue
                if rule.status is None and rule.answer is None:
                    pause += rule.delay
                    pace = max(pace, rule.pace)
                    warnings += [rule.warning] if rule.warning is not None else []
                elif failing is None:
                    failing = rule
                    pause += rule.delay
                else:
                    continue
                if rule.times is not None:
                    rule.times -= 1
        if pause:
            time.sleep(pause)
        if failing is not None and failing.answer is None:
            raise failing.error()
        return (failing.answer if failing else None), pace, warnings

    def _looping_token(self, resource: str, token: Optional[str]) -> tuple[Optional[str], bool]:
        """(the continue token ``loop_continue`` puts on this LIST page, whether ``token`` is one of its)."""
        with self._lock:
            loop = self._loop
            if loop is None or loop.resource not in (None, resource):
                return None, False
            loop.served += 1
            fresh = f"{_LOOP_PREFIX}{loop.served if loop.fresh else 0}"
        return fresh, bool(token and token.startswith(_LOOP_PREFIX))

    def _authorize(self, verb: str, target: _Target) -> None:
        rt = target.rt
        resource = rt.plural + (f"/{target.sub}" if target.sub else "")
        if self.is_allowed(verb, rt.group, resource, target.namespace, target.name or ""):
            return
        subject = f'{rt.group_resource} "{target.name}"' if target.name else rt.group_resource
        scope = (f'in the namespace "{target.namespace}"' if target.namespace
                 else "at the cluster scope")
        message = (f'{subject} is forbidden: User "{self.username}" cannot {verb} resource '
                   f'"{resource}" in API group "{rt.group}" {scope}')
        raise ApiError(403, message, details=_details(rt, target.name))

    def _continue_from(self, token: str) -> tuple[str, Key]:
        rv, last = _decode_continue(token)
        if self._expire > 0:
            self._expire -= 1
            fresh = _encode_continue(str(self._rv), last)
            raise ApiError(410, EXPIRED_MESSAGE, "Expired", metadata={"continue": fresh})
        return rv, last

    def _admit(self, op: str, new: Optional[JSON], old: Optional[JSON]) -> None:
        for fn in self._admission:
            verdict = fn(op, new, old)
            if verdict:
                raise ApiError(403, f'admission webhook "validate.gpustack.ai" denied the '
                                    f"request: {verdict}")


# --- A hanging server ------------------------------------------------------------------------
# Kept apart from FakeKube on purpose: it speaks no protocol at all. It is a listening socket
# that accepts every connection (so the client's connect succeeds, like a wedged API server or a
# load balancer whose backend died) and then never reads a byte nor answers.

class HangingServer:
    """``with HangingServer() as server: server.write_kubeconfig(path)``: accepts, never answers.

    ``accepted`` counts the connections taken (each is held open until ``stop``);
    ``first_accept`` is the ``time.monotonic()`` of the first one (None before it).
    """

    def __init__(self) -> None:
        self._listener: Optional[socket.socket] = None
        self._held: list[socket.socket] = []
        self._thread: Optional[threading.Thread] = None
        self._stopping = threading.Event()
        self.first_accept: Optional[float] = None

    @property
    def accepted(self) -> int:
        return len(self._held)

    def start(self) -> "HangingServer":
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        listener.settimeout(0.05)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name="hanging-server", daemon=True)
        self._thread.start()
        return self

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            if self.first_accept is None:
                self.first_accept = time.monotonic()
            self._held.append(conn)

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for conn in self._held:
            conn.close()
        if self._listener is not None:
            self._listener.close()

    def __enter__(self) -> "HangingServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._listener is not None, "HangingServer not started"
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def write_kubeconfig(self, path: Any, context: str = "hanging", namespace: Optional[str] = None) -> Any:
        """A kubeconfig (JSON) pointing at this server over plain HTTP with a token user."""
        ctx: JSON = {"cluster": context, "user": context}
        if namespace:
            ctx["namespace"] = namespace
        config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
                  "clusters": [{"name": context, "cluster": {"server": self.url}}],
                  "users": [{"name": context, "user": {"token": "hanging-token"}}],
                  "contexts": [{"name": context, "context": ctx}]}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)
        return path
