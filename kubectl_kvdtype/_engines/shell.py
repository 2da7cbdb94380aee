"""What a container's command runs: the engine, by its record's invocation words, or a ``sh -c``
line, read as a POSIX shell runs it.

A line's commands run in order, with the line's own variables and the object's ``env``; the
command that starts the engine gives the argv its parser reads (``read``, handed in by
``_engines.argv``). A value that depends on something this reader cannot know (``valueFrom``, the
image's environment, control flow, a command substitution) is reported as unknown rather than
guessed. Engines are named by their ``_engines.records`` record: nothing here branches on an
engine's name.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional, Sequence

from kubectl_kvdtype._engines import records as _records
from kubectl_kvdtype._engines.parsers import ABSENT, FAILED, UNKNOWN, Reading

_SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh"}


def engine_arguments(argv: Sequence[str], engine: str) -> Optional[list[str]]:
    """The engine's own arguments in a container argv: what follows one of the engine record's
    invocations (``vllm serve``, ``-m sglang.launch_server``...); the whole argv when no
    invocation is written (the image's entrypoint runs the engine); None when the argv runs
    something else (a shell)."""
    own, _, _ = entry_arguments(argv, engine)
    return own


def entry_arguments(argv: Sequence[str], engine: str) -> tuple[Optional[list[str]], bool, str]:
    """(the engine's own arguments, whether the argv writes the invocation, its entry point)."""
    record = _records.record(engine)
    for i in range(len(argv)):
        for words in record.invocations:
            if _invokes_at(argv, i, words):
                entry = next((name for start, name in record.entry_points if _invokes_at(argv, i, start)), "")
                return list(argv[i + len(words):]), True, entry
    if argv and not argv[0].startswith("-") and "/" not in argv[0] and argv[0] in _SHELLS:
        return None, False, ""
    return list(argv), False, ""


def _invokes_at(argv: Sequence[str], i: int, words: Sequence[str]) -> bool:
    """Whether ``words`` start at ``argv[i]``: a program by its base name, ``x*`` by prefix."""
    if i + len(words) > len(argv):
        return False
    for offset, word in enumerate(words):
        token = argv[i + offset]
        if offset == 0 and not word.startswith("-"):
            token = token.rsplit("/", 1)[-1]
        if not (token.startswith(word[:-1]) if word.endswith("*") else token == word):
            return False
    return True



def shell_line(tokens: list[str]) -> Optional[tuple[str, list[str]]]:
    """(script, positional parameters) for ``sh -c SCRIPT [$0 $1 ...]``; None otherwise."""
    if len(tokens) >= 3 and tokens[0].rsplit("/", 1)[-1] in _SHELLS:
        for i, token in enumerate(tokens[1:], start=1):
            if token.startswith("-") and "c" in token[1:] and not token.startswith("--"):
                if i + 1 < len(tokens):
                    return tokens[i + 1], tokens[i + 2:]
            elif not token.startswith("-"):
                break
    return None


_SEPARATORS = {";", "&&", "||", "|", "&", "\n", ";;", "(", ")"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


#: Reserved words and operators that open or close a compound command: what runs inside
#: depends on conditions and loops this reader does not evaluate.
_COMPOUND = {"if", "then", "elif", "else", "fi", "case", "esac", "for", "while", "until", "do", "done",
             "{", "}", "!", "(", ")"}
#: Commands whose exit status is known whatever their words: the ones ``&&`` and ``||`` are
#: evaluated after (any other command's status is not known, and neither is what follows it).
_STATUS = {":": 0, "true": 0, "false": 1, "echo": 0}


def read_line(script: str, positional: list[str], engine: str, env: Mapping[str, str],
                read: Callable[..., Reading]) -> Reading:
    """What the engine makes of the argv a ``sh -c`` line starts it with (``read`` reads one argv).

    Commands run in order, so assignments (``V=w``, ``export V=w``, ``${V:=w}``) made before the
    engine's command are seen by it; a command's own prefix assignments (``V=w vllm ...``) are
    not (the shell expands the words first). ``&&`` and ``||`` run the next command by the last
    one's exit status where it is known (assignments, ``:``, ``true``, ``false``, ``echo``, and
    an engine start that fails: the line goes on unless it was ``exec``'d); after a command
    whose status is not known, or inside ``if``/``case``/loops/braces/subshells, whether a later
    command runs is not known either: an engine started there is UNKNOWN, never guessed."""
    raw = _split_shell(script)
    if raw is None:
        return Reading(UNKNOWN, error="the shell line cannot be split (unbalanced quotes)")
    shell = _Shell(dict(env), positional)
    flow = _Flow()
    command: list[str] = []
    for token in raw + [";"]:
        if token not in _SEPARATORS and not set(token) <= set(";&|()\n"):
            command.append(token)
            continue
        if token in ("(", ")"):
            flow.unsure = flow.unsure or f"a subshell {token} ... (control flow this reader does not evaluate)"
        found = flow.step(shell, command, engine, read) if command else None
        command = []
        if found is not None:
            return found
        flow.operator = token
    return flow.failed or Reading(ABSENT)


class _Flow:
    """Which commands of a shell line run: the operator before the next one and the last status."""

    def __init__(self) -> None:
        self.operator = ";"  # what precedes the command being run
        self.status: Optional[int] = 0  # the last command's exit status; None: not known
        self.unsure = ""  # why a later command may or may not run (or see other variables)
        self.failed: Optional[Reading] = None  # an engine start that failed, the line going on
        self.last = ""  # the last command run (its first word)

    def _runs(self) -> Optional[bool]:
        if self.operator == "&&":
            return None if self.status is None else self.status == 0
        if self.operator == "||":
            return None if self.status is None else self.status != 0
        return True

    def step(self, shell: "_Shell", words: list[str], engine: str, read: Callable[..., Reading]) -> Optional[Reading]:
        """Run one simple command (or skip it): a Reading when the line's outcome is decided."""
        runs = self._runs()
        if runs is False:  # skipped: the status stays
            return None
        if words[0] in _COMPOUND:
            self.unsure = self.unsure or f"the shell line's {words[0]} ... (control flow this reader does not evaluate)"
        elif runs is None:
            self.unsure = self.unsure or f"whether {self.last} succeeds (the shell line's {self.operator})"
        self.last = " ".join(words[:1] + (["..."] if len(words) > 1 else []))
        if self.unsure:
            found = shell.run(words, engine)
            if found is None:
                self.status = None
                return None
            return Reading(UNKNOWN, error=f"depends on {self.unsure}")
        if words[0] == "exit":
            return self.failed or Reading(ABSENT)
        executed = next((w for w in words if not _ASSIGNMENT.match(w)), "") == "exec"
        found = shell.run(words, engine)
        if found is None:
            self.status = 0 if shell.assigned_only else _STATUS.get(words[0])
            return None
        reading = found if isinstance(found, Reading) else read(*found)
        if reading.state == FAILED and not executed:  # the engine exited; the shell goes on
            self.status, self.failed = reading.exit_code or 1, reading
            return None
        return reading


class _Unknowable(Exception):
    """A shell expansion this reader does not evaluate (command substitution, ``${V%x}``, ...)."""


class _Shell:
    """The state of a POSIX shell running a ``sh -c`` line: variables, and which are unknown.

    Variables the object defines (its ``env`` literal values) and the line's own assignments are
    known. Any other (``valueFrom``, ``envFrom``, the image's environment) is read as unset, the
    shell's default, and recorded in ``used`` so the reading says it depends on it."""

    def __init__(self, variables: dict[str, str], positional: list[str]) -> None:
        self.variables = variables
        self.positional = positional
        self.depends: dict[str, tuple[str, ...]] = {}  # a variable set from unknown ones: those
        self.used: list[str] = []  # unknown variables the current command's words read
        self.assigned_only = False  # whether the last command run was assignments only (status 0)

    def run(self, words: list[str], engine: str) -> Any:
        """Run one simple command: None, or what it makes of the engine when it starts it."""
        count = next((i for i, w in enumerate(words) if not _ASSIGNMENT.match(w)), len(words))
        rest = words[count:]
        if rest[:1] in (["export"], ["readonly"]):
            words, rest = words[:count] + [w for w in rest[1:] if _ASSIGNMENT.match(w)], []
        self.assigned_only = not rest
        if not rest:  # assignments only: they last for the rest of the line
            for word in words:
                self._assign(word)
            return None
        if rest[0] == "exec":
            rest = rest[1:]
        self.used = []
        argv, unknowable = [], ""
        for word in rest:
            try:
                argv += self.fields(word)
            except _Unknowable as why:
                argv.append(word)
                unknowable = unknowable or str(why)
        if not _invokes(argv, engine):
            return None
        if unknowable:
            return Reading(UNKNOWN, error=f"depends on {unknowable}, which this reader does not evaluate")
        return argv, list(dict.fromkeys(self.used))

    def _assign(self, word: str) -> None:
        name, _, value = word.partition("=")
        self.used = []
        try:
            self.variables[name] = "".join(text for text, _ in self._pieces(value, quoted=False, assigning=True))
        except _Unknowable:
            self.variables[name] = ""
            self.used = [name]
        if self.used:
            self.depends[name] = tuple(dict.fromkeys(self.used))
        else:
            self.depends.pop(name, None)

    def fields(self, word: str) -> list[str]:
        """One word after parameter expansion, field splitting (default IFS) and quote removal."""
        if word == '"$@"':
            return list(self.positional[1:])
        fields: list[str] = []
        current, started = "", False
        for text, splittable in self._pieces(word, quoted=False):
            if not splittable:
                current, started = current + text, True
                continue
            parts = re.split(r"[ \t\n]+", text)
            for k, part in enumerate(parts):
                if k and (started or current):
                    fields.append(current)
                if k:
                    current, started = "", False
                current += part
        if started or current:
            fields.append(current)
        return fields

    def _pieces(self, word: str, quoted: bool, assigning: bool = False,
                expanded: bool = False) -> list[tuple[str, bool]]:
        """(text, subject to field splitting) pieces of ``word``; ``quoted``: inside double quotes;
        ``expanded``: ``word`` is a ``${V:-word}`` operand (its unquoted text splits too)."""
        pieces: list[tuple[str, bool]] = []
        i, quote = 0, '"' if quoted else ""
        splits = expanded and not assigning
        while i < len(word):
            char = word[i]
            if quote == "'":
                quote = "" if char == "'" else quote
                pieces.append(("" if char == "'" else char, False))
            elif char == "'" and not quote:
                quote = "'"
                pieces.append(("", False))
            elif char == '"' and not quoted:
                quote = "" if quote else '"'
                pieces.append(("", False))
            elif char == "\\" and i + 1 < len(word):
                following = word[i + 1]
                if quote and following not in '$`"\\\n':
                    pieces.append((char + following, False))
                else:
                    pieces.append(("" if following == "\n" else following, False))
                i += 1
            elif char == "`":
                raise _Unknowable("a command substitution (`...`)")
            elif char == "$":
                length, value_pieces = self._parameter(word, i, bool(quote), assigning)
                pieces += value_pieces
                i += length
                continue
            else:
                pieces.append((char, splits and not quote))
            i += 1
        return pieces

    def _parameter(self, word: str, i: int, quoted: bool, assigning: bool) -> tuple[int, list[tuple[str, bool]]]:
        """(length, pieces) of the expansion at ``word[i]`` (a ``$``)."""
        rest = word[i + 1:]
        if rest.startswith("("):
            raise _Unknowable("a command substitution ($(...))")
        if rest.startswith("{"):
            end = _closing_brace(word, i + 1)
            inner = word[i + 2:end]
            match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#]", inner)
            if not match or inner.startswith("#") and len(inner) > 1:
                raise _Unknowable(f"${{{inner}}}")
            name, operation = match.group(0), inner[match.end():]
            operator = re.match(r":?[-=+?]", operation)
            if operation and not operator:
                raise _Unknowable(f"${{{inner}}}")
            pieces = self._operate(name, operator.group(0) if operator else "",
                                   operation[operator.end():] if operator else "", quoted, assigning)
            return end - i + 1, pieces
        match = re.match(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]|[@*#]", rest)
        if not match:
            if rest[:1] in ("$", "?", "!", "-"):
                raise _Unknowable(f"${rest[:1]}")
            return 1, [("$", False)]
        return 1 + match.end(), self._operate(match.group(0), "", "", quoted, assigning)

    def _operate(self, name: str, operator: str, operand: str, quoted: bool,
                 assigning: bool) -> list[tuple[str, bool]]:
        value = self._lookup(name)
        is_set = value is not None
        null = not value
        if operator in ("-", ":-", "=", ":=") and (not is_set or (operator.startswith(":") and null)):
            pieces = self._pieces(operand, quoted, assigning, expanded=True)
            if operator.endswith("="):  # assigned now, but from a value the object may set
                self.variables[name] = "".join(text for text, _ in pieces)
                self.depends[name] = tuple(dict.fromkeys(self.used))
            return pieces
        if operator in ("+", ":+"):
            if is_set and not (operator == ":+" and null):
                return self._pieces(operand, quoted, assigning, expanded=True)
            return []
        if operator.endswith("?") and (not is_set or (operator == ":?" and null)):
            raise _Unknowable(f"{name} (the shell exits when it is unset)")
        return [(value or "", not quoted and not assigning)]

    def _lookup(self, name: str) -> Optional[str]:
        if name.isdigit():
            return self.positional[int(name)] if int(name) < len(self.positional) else None
        if name in ("@", "*"):
            return " ".join(self.positional[1:])
        if name == "#":
            return str(max(len(self.positional) - 1, 0))
        self.used += self.depends.get(name, ())
        if name not in self.variables:
            self.used.append(name)
            return None
        return self.variables[name]


def _closing_brace(word: str, start: int) -> int:
    """The index of the ``}`` closing the ``{`` at ``word[start]`` (quotes and nesting skipped)."""
    depth, quote = 0, ""
    for i in range(start, len(word)):
        char = word[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
    raise _Unknowable(f"an unclosed ${{ in {word!r}")


def _split_shell(script: str) -> Optional[list[str]]:
    """Words and operators (``;``, ``&&``, ``|``, newline, ...) of a shell line, quotes kept.

    Like ``shlex`` in punctuation-aware mode, but the quotes stay in each word so that expansion
    (:class:`_Shell`) knows what was single-quoted, and a ``${...}`` or ``$(...)`` stays one
    piece of its word. None when a quote is left open."""
    words: list[str] = []
    word, quote, i, depth = "", "", 0, 0
    while i < len(script):
        char = script[i]
        if quote:
            word += char
            if char == quote:
                quote = ""
            elif char == "\\" and quote == '"' and i + 1 < len(script):
                i += 1
                word += script[i]
        elif char in "'\"":
            quote, word = char, word + char
        elif char == "\\" and i + 1 < len(script):
            word += char + script[i + 1]
            i += 1
        elif char == "$" and script[i + 1:i + 2] in ("{", "("):
            depth += 1
            word += char + script[i + 1]
            i += 1
        elif depth and char in "})":
            depth -= 1
            word += char
        elif depth:
            word += char
        elif char in " \t\r":
            if word:
                words.append(word)
            word = ""
        elif char in ";&|()\n":
            if word:
                words.append(word)
            word = ""
            operator = char
            while i + 1 < len(script) and script[i + 1] in ";&|" and char != "\n":
                i += 1
                operator += script[i]
            words.append(operator)
        elif char == "#" and not word:
            while i < len(script) and script[i] != "\n":
                i += 1
            continue
        else:
            word += char
        i += 1
    if quote or depth:
        return None
    if word:
        words.append(word)
    return words


def _invokes(argv: list[str], engine: str) -> bool:
    own = engine_arguments(argv, engine)
    return own is not None and len(own) < len(argv)

