#!/bin/sh
# Install git-nerve for you, the way pipx and uv install a tool:
#   commands     ~/.local/bin/git-worker, ~/.local/bin/git-nerve        (links into the virtualenv)
#   virtualenv   ~/.local/share/git-nerve/venv
#   man pages    ~/.local/share/man/man1/git-worker*.1, git-nerve*.1    (`git worker --help`)
#   completion   ~/.local/share/bash-completion/completions/, zsh/site-functions/, fish/vendor_completions.d/
#   manifest     ~/.local/share/git-nerve/install-manifest              (what --uninstall removes)
#
#   ./install.sh               install for the current user (root too: /root/.local)
#   ./install.sh --demo [ARGS] install, then run `git nerve demo [ARGS]` from what was installed
#                              (also when PREFIX/bin is not on your PATH yet)
#   PREFIX=DIR ./install.sh    install under DIR instead (PREFIX=/usr/local: for every user)
#   ./install.sh --uninstall   remove exactly what the install under PREFIX recorded, nothing else
#
# Exit 0: installed and `git nerve` is on PATH. Exit 3: installed, but PREFIX/bin is not (first) on
# PATH: the line to run is printed. Exit 1: nothing usable was installed (the reason is printed).
# With --demo: the demo's own exit code (0 when it ran through), the PATH line printed all the same.
# Needs only python3 (with its venv module) and git; dependencies come from your pip index.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
action=install
demo=""
case "${1:-}" in
    "") ;;
    --uninstall) action=uninstall ;;
    --demo) demo=yes; shift ;;  # the rest of the arguments are the demo's
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (usage: ./install.sh [--demo [DEMO ARGS]] | --uninstall)" >&2; exit 2 ;;
esac

if [ -z "${HOME:-}" ] && [ -z "${PREFIX:-}" ]; then
    echo "install.sh: HOME is not set; set HOME or PREFIX" >&2
    exit 1
fi
explicit_prefix=${PREFIX:+yes}
PREFIX=${PREFIX:-$HOME/.local}
case "$PREFIX" in
    /*) ;;
    *) PREFIX="$(pwd)/$PREFIX" ;;
esac
case "$PREFIX" in
    *"
"*) echo "install.sh: PREFIX must not contain a newline" >&2; exit 2 ;;
esac
PREFIX=${PREFIX%/}
bin="$PREFIX/bin"
man1="$PREFIX/share/man/man1"
data="$PREFIX/share/git-nerve"
venv="$data/venv"
manifest="$data/install-manifest"
commands="git-worker git-nerve"
completion_files="bash:share/bash-completion/completions/% zsh:share/zsh/site-functions/_% fish:share/fish/vendor_completions.d/%.fish"

# -- the manifest: one line per thing the install made: "KIND CKSUM PATH" ------------------------------
# KIND: link (a symlink into our venv), file (CKSUM: its `cksum` when written), dir (made by us; removed
# when empty), venv (our virtualenv, removed whole).

in_manifest() {  # PATH: was it recorded by an earlier install under this PREFIX?
    [ -f "$manifest" ] || return 1
    while IFS= read -r line; do
        [ "${line#* * }" = "$1" ] && return 0
    done < "$manifest"
    return 1
}

file_sum() { cksum < "$1" | awk '{print $1 "-" $2}'; }

remove_entry() {  # KIND CKSUM PATH: remove it if it is still what the install made
    kind=$1 sum=$2 path=$3
    case "$kind" in
        link)
            if [ -L "$path" ]; then
                case "$(readlink "$path")" in
                    "$venv"/*) rm -f "$path" && echo "removed $path" ;;
                    *) echo "kept $path (now points elsewhere)" ;;
                esac
            fi ;;
        file)
            if [ -f "$path" ] && [ ! -L "$path" ]; then
                if [ "$(file_sum "$path")" = "$sum" ]; then rm -f "$path" && echo "removed $path"
                else echo "kept $path (changed since the install)"; fi
            fi ;;
        venv)
            if [ -d "$path" ] && [ -f "$path/pyvenv.cfg" ]; then rm -rf "$path" && echo "removed $path"; fi ;;
        dir) ;;  # afterwards, deepest first, only when empty
    esac
}

uninstall() {
    if [ ! -f "$manifest" ]; then
        echo "install.sh: nothing to uninstall: no $manifest (an install under PREFIX=$PREFIX records one)" >&2
        exit 1
    fi
    # the man page links a command run through a link of ours made (manlink.py), while the venv is still there
    if [ -x "$venv/bin/python" ]; then
        "$venv/bin/python" -m git_nerve.manlink --unlink "$bin" 2>/dev/null || true
    fi
    while IFS= read -r line; do
        kind=${line%% *}; rest=${line#* }; sum=${rest%% *}; path=${rest#* }
        remove_entry "$kind" "$sum" "$path"
    done < "$manifest"
    dirs=$(grep '^dir ' "$manifest" | sed 's/^dir - //' | awk '{print length($0) " " $0}' | sort -rn | cut -d' ' -f2-)
    rm -f "$manifest"
    printf '%s\n' "$dirs" | while IFS= read -r d; do
        [ -n "$d" ] && rmdir "$d" 2>/dev/null && echo "removed $d/" || true
    done
    echo "git-nerve uninstalled from $PREFIX"
}

if [ "$action" = uninstall ]; then
    uninstall
    exit 0
fi

# -- install ---------------------------------------------------------------------------------------------

if ! command -v "$python" >/dev/null 2>&1; then
    echo "install.sh: $python not found; install Python 3.10 or newer" >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "install.sh: git-nerve needs Python 3.10 or newer ($("$python" --version 2>&1) found)" >&2
    exit 1
fi
if ! command -v git >/dev/null 2>&1; then
    echo "install.sh: git not found; install git first" >&2
    exit 1
fi

# Everything the install would write, checked before anything is written: what is there and was not made
# by an earlier install.sh under this PREFIX is never touched.
refuse() {
    echo "install.sh: $1 exists and was not installed by install.sh under $PREFIX; move it away, or choose another PREFIX=DIR" >&2
    exit 1
}
for cmd in $commands; do
    { [ -e "$bin/$cmd" ] || [ -L "$bin/$cmd" ]; } && ! in_manifest "$bin/$cmd" && refuse "$bin/$cmd"
done
for page in "$man1"/git-worker*.1 "$man1"/git-nerve*.1; do
    { [ -e "$page" ] || [ -L "$page" ]; } && ! in_manifest "$page" && refuse "$page"
done
for spec in $completion_files; do
    for cmd in $commands; do
        rel=$(printf '%s' "${spec#*:}" | sed "s/%/$cmd/")
        { [ -e "$PREFIX/$rel" ] || [ -L "$PREFIX/$rel" ]; } && ! in_manifest "$PREFIX/$rel" && refuse "$PREFIX/$rel"
    done
done
[ -e "$venv" ] && ! in_manifest "$venv" && refuse "$venv"

if [ -n "$explicit_prefix" ]; then
    echo "Installing git-nerve under PREFIX=$PREFIX"
else
    echo "Installing git-nerve for $(id -un 2>/dev/null || echo you) under $PREFIX (PREFIX=DIR ./install.sh to choose; PREFIX=/usr/local for every user)"
fi

# Each thing is recorded in the manifest before it is made, so an install stopped half-way is
# still undone by --uninstall (and a rerun may replace it). $new lists what this run made.
new="$manifest.run"
has_line() {  # LINE FILE
    [ -f "$2" ] && grep -qxF -- "$1" "$2"
}
record() {
    has_line "$1" "$manifest" || printf '%s\n' "$1" >> "$manifest"
    printf '%s\n' "$1" >> "$new"
}
mkdir_recorded() {  # DIR: mkdir -p, each directory it makes recorded (removed by --uninstall when empty)
    set -- "$1" ""
    d=$1
    while [ ! -d "$d" ]; do set -- "$1" "$d
$2"; d=$(dirname "$d"); done
    missing=$2
    if [ -d "$data" ]; then
        printf '%s' "$missing" | while IFS= read -r m; do [ -n "$m" ] && record "dir - $m"; done
        mkdir -p "$1"
    else  # the manifest's own directory first
        mkdir -p "$1"
        printf '%s' "$missing" | while IFS= read -r m; do [ -n "$m" ] && record "dir - $m"; done
    fi
}
mkdir_recorded "$data"
: > "$new"
[ -f "$manifest" ] && grep '^dir ' "$manifest" >> "$new" || true

# The virtualenv: built fresh each time (an upgrade replaces it).
record "venv - $venv"
echo "Creating the virtualenv $venv"
if ! "$python" -m venv --clear "$venv" >/dev/null 2>&1; then
    echo "install.sh: '$python -m venv' failed; install your distribution's venv package (e.g. apt-get install python3-venv)" >&2
    exit 1
fi
echo "Installing git-nerve and its dependencies from your pip index"
if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here"; then
    echo "install.sh: 'pip install $here' failed (above); nothing was linked" >&2
    exit 1
fi

mkdir_recorded "$bin"
for cmd in $commands; do
    ln -sfn "$venv/bin/$cmd" "$bin/$cmd"
    record "link - $bin/$cmd"
done

put() {  # STAGED DEST: move a generated file into place and record it
    mkdir_recorded "$(dirname "$2")"
    mv -f "$1" "$2"
    record "file $(file_sum "$2") $2"
}

staging="$data/staging.$$"
rm -rf "$staging"
mkdir -p "$staging/man1"
"$venv/bin/python" -m git_nerve.manpages "$staging/man1" >/dev/null
for page in "$staging"/man1/*.1; do
    put "$page" "$man1/$(basename "$page")"
done
"$venv/bin/python" -m git_nerve.completion --all "$staging"  # every script in one process
for spec in $completion_files; do
    shell=${spec%%:*}
    for cmd in $commands; do
        rel=$(printf '%s' "${spec#*:}" | sed "s/%/$cmd/")
        put "$staging/$shell-$cmd" "$PREFIX/$rel"
    done
done
rm -rf "$staging"

# What an earlier install made and this one did not (a page of a command that is gone): removed.
while IFS= read -r line; do
    case "$line" in dir\ *) continue ;; esac
    has_line "$line" "$new" && continue
    kind=${line%% *}; rest=${line#* }; remove_entry "$kind" "${rest%% *}" "${rest#* }" >/dev/null
done < "$manifest"
mv -f "$new" "$manifest"

echo "Installed: $bin/git-worker, $bin/git-nerve; man pages in $man1; shell completion for bash, zsh and fish"
echo "Uninstall: $( [ -n "$explicit_prefix" ] && printf 'PREFIX=%s ' "$PREFIX")$here/install.sh --uninstall"
case "$PREFIX" in
    "$HOME/.local") echo "zsh: add 'fpath=(~/.local/share/zsh/site-functions \$fpath)' before compinit in ~/.zshrc for completion" ;;
esac

found=$(command -v git-nerve 2>/dev/null || true)
rc=0
if [ "$found" != "$bin/git-nerve" ]; then
    if [ -z "$found" ]; then
        echo "install.sh: installed, but $bin is not on your PATH, so 'git nerve' is not found yet. Run:" >&2
    else
        echo "install.sh: installed, but another git-nerve comes first on your PATH ($found). Run:" >&2
    fi
    echo "" >&2
    echo "    export PATH=\"$bin:\$PATH\" && git nerve demo" >&2
    echo "" >&2
    echo "and put the export line in your shell's start-up file (~/.bashrc, ~/.zshrc, ~/.profile)." >&2
    rc=3
fi
if [ -n "$demo" ]; then  # from what was just installed, whatever PATH says (its own commands found first)
    [ "$rc" -eq 0 ] || echo "install.sh: running the demo from $bin meanwhile" >&2
    PATH="$bin:$PATH" exec "$bin/git-nerve" demo "$@"
fi
exit "$rc"
