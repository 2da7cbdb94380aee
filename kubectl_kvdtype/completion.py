"""``completion bash|zsh|fish``: print a shell completion script.

The scripts ask the plugin itself what may come next (``kubectl-kvdtype __complete ...``); the
engine that answers is ``_cli.complete``.
"""

from __future__ import annotations

import argparse

from kubectl_kvdtype._commands.command import Command, Context
from kubectl_kvdtype._kits.records import record_type
from kubectl_kvdtype._kits.report import Report

SHELLS = ("bash", "zsh", "fish")


class CompletionCommand(Command):
    name = "completion"
    examples = (
        ("bash, in ~/.bashrc", "source <(kubectl kvdtype completion bash)"),
        ("fish, in ~/.config/fish/config.fish", "kubectl kvdtype completion fish | source"),
    )
    description = (
        "Print a completion script for kubectl-kvdtype. Load it with "
        "'source <(kubectl kvdtype completion bash)' (zsh: the same with zsh; fish: "
        "'kubectl kvdtype completion fish | source'), or save it where your shell loads completions. "
        "'kubectl kvdtype <TAB>' itself is completed by kubectl >= 1.26 through the "
        "kubectl_complete-kvdtype helper on PATH."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("shell", choices=SHELLS, help="the shell to print the script for")

    def run(self, context: Context) -> Report:
        return Report(kind="Completion", text=SCRIPTS[CompletionOptions.of(context.options).shell])


@record_type(frozen=True)
class CompletionOptions:
    """completion's own flag, typed, read from the parsed command line at this boundary."""

    shell: str

    @classmethod
    def of(cls, flags: argparse.Namespace) -> "CompletionOptions":
        return cls(shell=flags.shell)


# --- The scripts ---------------------------------------------------------------------------------

BASH = r"""# bash completion for kubectl-kvdtype (kubectl kvdtype)
# Load it: source <(kubectl kvdtype completion bash)
# 'kubectl kvdtype <TAB>' is completed by kubectl itself through kubectl_complete-kvdtype on PATH.
_kubectl_kvdtype_complete() {
    local line="${COMP_LINE:0:COMP_POINT}" out directive cur prefix candidate
    local -a words lines
    read -ra words <<< "$line"
    [[ "$line" == *[[:space:]] ]] && words+=("")
    cur="${words[${#words[@]}-1]}"
    out=$("${words[0]}" __complete "${words[@]:1}" 2>/dev/null) || return 0
    mapfile -t lines <<< "$out"
    directive="${lines[${#lines[@]}-1]#:}"
    unset 'lines[${#lines[@]}-1]'
    # bash splits "--output=js" at "="; the candidate must replace only the part after it.
    prefix=""
    if [[ "$cur" == *=* && "$COMP_WORDBREAKS" == *=* ]]; then prefix="${cur%%=*}="; fi
    COMPREPLY=()
    for candidate in "${lines[@]}"; do
        candidate="${candidate%%$'\t'*}"
        [[ -n "$candidate" ]] && COMPREPLY+=("${candidate#"$prefix"}")
    done
    if (( ${#COMPREPLY[@]} == 0 && (directive & 4) == 0 )); then
        compopt -o default 2>/dev/null
    fi
    return 0
}
complete -o nosort -F _kubectl_kvdtype_complete kubectl-kvdtype 2>/dev/null \
    || complete -F _kubectl_kvdtype_complete kubectl-kvdtype
"""

ZSH = r"""#compdef kubectl-kvdtype
# zsh completion for kubectl-kvdtype (kubectl kvdtype)
# Load it: source <(kubectl kvdtype completion zsh)   (after compinit)
# 'kubectl kvdtype <TAB>' is completed by kubectl itself through kubectl_complete-kvdtype on PATH.
_kubectl_kvdtype() {
    local out directive line
    local -a lines described
    out=$("${words[1]}" __complete "${(@)words[2,CURRENT-1]}" "${words[CURRENT]}" 2>/dev/null) || return 1
    lines=("${(@f)out}")
    directive="${lines[-1]#:}"
    lines=("${(@)lines[1,-2]}")
    for line in "${lines[@]}"; do
        [[ -z "$line" ]] && continue
        if [[ "$line" == *$'\t'* ]]; then
            described+=("${${line%%$'\t'*}//:/\\:}:${line#*$'\t'}")
        else
            described+=("${line//:/\\:}")
        fi
    done
    if (( ${#described} )); then
        _describe -t kvdtype 'kubectl kvdtype' described
    elif (( (directive & 4) == 0 )); then
        _files
    fi
}
if [[ "$funcstack[1]" == "_kubectl_kvdtype" ]]; then
    _kubectl_kvdtype "$@"
else
    compdef _kubectl_kvdtype kubectl-kvdtype
fi
"""

FISH = r"""# fish completion for kubectl-kvdtype (kubectl kvdtype)
# Load it: kubectl kvdtype completion fish | source
# 'kubectl kvdtype <TAB>' is completed by kubectl itself through kubectl_complete-kvdtype on PATH.
function __kubectl_kvdtype_complete
    set -l words (commandline -opc)
    set -l out ($words[1] __complete $words[2..-1] (commandline -ct) 2>/dev/null)
    or return
    set -l directive (string replace -r '^:' '' -- $out[-1])
    set -e out[-1]
    if test (count $out) -eq 0; and test (math "bitand($directive, 4)") -eq 0
        __fish_complete_path (commandline -ct)
        return
    end
    printf '%s\n' $out
end
complete -c kubectl-kvdtype -f -k -a '(__kubectl_kvdtype_complete)'
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH, "fish": FISH}
