"""Shell completion for ``git worker`` / ``git-worker`` and ``git nerve`` / ``git-nerve``.

The scripts (bash, zsh, fish) ask the program itself through click's completion protocol
(``_GIT_WORKER_COMPLETE=bash_complete git-worker`` with ``COMP_WORDS``/``COMP_CWORD``), so
commands and options are always the installed ones. Task arguments (``TASK_ID``,
``--task``, a thread id) complete the task ids on the bus, read-only (``bus.peek``);
a command that acts on tasks in one state (``approve`` on IN_REVIEW, ``merge`` on
APPROVED, ``retry`` on FAILED) offers only those.

For git's own form, ``git worker <TAB>``: git's bash completion calls ``_git_worker``
(loading the completion file named ``git-worker`` first when bash-completion is there),
zsh's ``_git`` calls ``_git-worker``, fish's git completion runs ``complete -C "git-worker ..."``.
Each script defines what its shell's git completion looks for.

``python -m git_nerve.completion SHELL PROGRAM`` prints one program's script (install.sh
writes them where each shell loads completions from); ``git nerve completion SHELL`` prints
both programs' for people who manage their own.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import __version__

SHELLS = ("bash", "zsh", "fish")
PROGRAMS = ("git-worker", "git-nerve")
#: The environment variable click's completion protocol answers to, per program.
COMPLETE_VARS = {"git-worker": "_GIT_WORKER_COMPLETE", "git-nerve": "_GIT_NERVE_COMPLETE"}
#: Parameters that name a task.
TASK_PARAMS = frozenset({"task_id", "task", "thread_id"})
#: Commands that act only on tasks in these states (others: every task).
STATES_FOR = {
    "approve": frozenset({"IN_REVIEW"}),
    "request-changes": frozenset({"IN_REVIEW"}),
    "merge": frozenset({"APPROVED"}),
    "retry": frozenset({"FAILED"}),
    "cancel": frozenset({"ASSIGNED", "WORKING", "CONFLICTED", "IN_REVIEW", "APPROVED", "FAILED"}),
    "start": frozenset({"ASSIGNED", "CONFLICTED"}),
    "done": frozenset({"WORKING", "CONFLICTED"}),
}

# bash: `{fn}` is the program with - -> _ (git_worker); git's completion calls `_{fn}`.
_BASH = r"""# bash completion for {prog} and `git {sub}` (git-nerve {version}); printed by `git nerve completion bash`
__{fn}_query() {{  # CWORD WORDS...: click's completion protocol; one "type,value" per line
    local cword=$1; shift
    local joined="$*"
    env COMP_WORDS="$joined" COMP_CWORD="$cword" {var}=bash_complete {prog} 2>/dev/null
}}

__{fn}_fill() {{  # SUFFIX CWORD WORDS...: COMPREPLY from the answer, each value + SUFFIX
    local suffix=$1; shift
    local IFS=$'\n' line
    COMPREPLY=()
    for line in $(__{fn}_query "$@"); do
        case ${{line%%,*}} in
            plain) COMPREPLY+=("${{line#*,}}$suffix") ;;
            file|dir) COMPREPLY=(); compopt -o default 2>/dev/null; return 0 ;;
        esac
    done
    return 0
}}

# `git {sub} <TAB>`: git's completion (words, cword, __git_cmd_idx) calls this; it adds no space itself.
_{fn}() {{
    local i=${{__git_cmd_idx:-1}}
    __{fn}_fill " " $((cword - i)) {prog} "${{words[@]:i+1}}"
}}

# `{prog} <TAB>`
__{fn}_complete() {{
    __{fn}_fill "" "$COMP_CWORD" "${{COMP_WORDS[@]}}"
}}
complete -o nosort -F __{fn}_complete {prog} 2>/dev/null || complete -F __{fn}_complete {prog}
"""

_ZSH = r"""#compdef {prog}
# zsh completion for {prog} and `git {sub}` (git-nerve {version}); printed by `git nerve completion zsh`.
# zsh's _git calls _{prog} for `git {sub} <TAB>` (words[1] is then "{sub}").
_{prog}() {{
    local -a response described plain
    local type key descr
    response=("${{(@f)$(env COMP_WORDS="{prog} ${{words[2,-1]}}" COMP_CWORD=$((CURRENT-1)) {var}=zsh_complete {prog} 2>/dev/null)}}")
    for type key descr in "${{response[@]}}"; do
        case $type in
            plain) if [[ $descr == _ ]]; then plain+=("$key"); else described+=("$key:$descr"); fi ;;
            dir) _path_files -/ ;;
            file) _path_files -f ;;
        esac
    done
    (( ${{#described}} )) && _describe -V unsorted completions described -U
    (( ${{#plain}} )) && compadd -U -V unsorted -a plain
    return 0
}}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _{prog} "$@"
else
    compdef _{prog} {prog}
fi
"""

_FISH = r"""# fish completion for {prog} and `git {sub}` (git-nerve {version}); printed by `git nerve completion fish`.
# fish's git completion runs `complete -C "{prog} ..."` for `git {sub} <TAB>`.
function __{fn}_complete
    set -l response (env {var}=fish_complete COMP_WORDS=(commandline -cp) COMP_CWORD=(commandline -t) {prog} 2>/dev/null)
    for completion in $response
        set -l metadata (string split -m 1 "," -- $completion)
        switch $metadata[1]
            case dir
                __fish_complete_directories $metadata[2]
            case file
                __fish_complete_path $metadata[2]
            case plain
                printf '%s\n' $metadata[2]
        end
    end
end
complete --no-files --command {prog} --arguments "(__{fn}_complete)"
"""

_TEMPLATES = {"bash": _BASH, "zsh": _ZSH, "fish": _FISH}
#: Where each shell loads a program's completion from, relative to the install prefix
#: (bash-completion also looks in <bin>/../share/bash-completion/completions).
FILES = {
    "bash": "share/bash-completion/completions/{prog}",
    "zsh": "share/zsh/site-functions/_{prog}",
    "fish": "share/fish/vendor_completions.d/{prog}.fish",
}


def script(shell: str, program: str) -> str:
    """One program's completion script for ``shell``."""
    if shell not in _TEMPLATES:
        raise ValueError(f"unknown shell {shell!r}; expected one of {', '.join(SHELLS)}")
    if program not in COMPLETE_VARS:
        raise ValueError(f"unknown program {program!r}; expected one of {', '.join(PROGRAMS)}")
    return _TEMPLATES[shell].format(prog=program, sub=program.split("-", 1)[1], fn=program.replace("-", "_"),
                                    var=COMPLETE_VARS[program], version=__version__)


def scripts(shell: str) -> str:
    """Both programs' scripts, to source from a shell's start-up file."""
    return "\n".join(script(shell, program) for program in PROGRAMS)


# -- task ids ----------------------------------------------------------------


def task_candidates(command: str | None, incomplete: str, cwd: str | None = None) -> list[tuple[str, str]]:
    """(task id, "STATE description") for the tasks ``command`` can act on, starting with ``incomplete``."""
    from .bus import peek
    from .git import location

    common_dir = location.common_dir(cwd, inherit_location=True, timeout=5)
    if common_dir is None:
        return []
    states = STATES_FOR.get(command or "")
    out = []
    for task_id, state, description in peek.tasks(Path(common_dir) / "nerve" / "bus.db"):
        if task_id.startswith(incomplete) and (states is None or state in states):
            out.append((task_id, f"{state} {description}".strip()))
    return out


def attach(group) -> None:
    """Make every task parameter under ``group`` complete task ids (done only when completing)."""
    import click
    from click.shell_completion import CompletionItem

    def complete_task(ctx: click.Context, param: click.Parameter, incomplete: str) -> list:
        try:
            found = task_candidates(ctx.command.name, incomplete)
        except Exception:  # a TAB press never prints a traceback
            return []
        return [CompletionItem(task_id, help=help_text) for task_id, help_text in found]

    def walk(command) -> None:
        for param in command.params:
            if param.name in TASK_PARAMS:
                param._custom_shell_complete = complete_task
        if isinstance(command, click.Group):
            for sub in command.commands.values():
                walk(sub)

    walk(group)


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--all":  # install.sh: every script in one process, as DIR/<shell>-<program>
        for shell in SHELLS:
            for program in PROGRAMS:
                with open(os.path.join(argv[1], f"{shell}-{program}"), "w", encoding="utf-8") as fh:
                    fh.write(script(shell, program))
        return 0
    if len(argv) != 2 or argv[0] not in SHELLS or argv[1] not in PROGRAMS:
        print(f"usage: python -m git_nerve.completion {{{'|'.join(SHELLS)}}} {{{'|'.join(PROGRAMS)}}}"
              " | --all DIR", file=sys.stderr)
        return 2
    sys.stdout.write(script(argv[0], argv[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
