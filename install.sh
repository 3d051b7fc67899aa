#!/bin/sh
# Install git-nerve: a private virtualenv, `git worker` and `git nerve` on PATH, man pages for `git worker --help`.
#
#   ./install.sh            install for this machine (/usr/local when writable, else ~/.local)
#   PREFIX=DIR ./install.sh install the commands under DIR/bin and the man pages under DIR/share/man/man1
#
# Needs only python3 (with its venv module) and git; dependencies come from PyPI.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}

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

if [ -z "${PREFIX:-}" ]; then
    if [ -w /usr/local/bin ] 2>/dev/null; then PREFIX=/usr/local; else PREFIX="$HOME/.local"; fi
fi
data="${XDG_DATA_HOME:-$HOME/.local/share}/git-nerve"
venv="$data/venv"

echo "Installing git-nerve into $venv"
if ! "$python" -m venv --clear "$venv" >/dev/null 2>&1; then
    echo "install.sh: '$python -m venv' failed; install your distribution's venv package (e.g. apt-get install python3-venv)" >&2
    exit 1
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here"

mkdir -p "$PREFIX/bin" "$PREFIX/share/man/man1"
for cmd in git-worker git-nerve; do
    ln -sf "$venv/bin/$cmd" "$PREFIX/bin/$cmd"
done
"$venv/bin/python" -m git_nerve.manpages "$PREFIX/share/man/man1" >/dev/null
command -v mandb >/dev/null 2>&1 && mandb -q "$PREFIX/share/man" >/dev/null 2>&1 || true

echo "Installed: $PREFIX/bin/git-worker, $PREFIX/bin/git-nerve; man pages in $PREFIX/share/man/man1"
case ":$PATH:" in
    *":$PREFIX/bin:"*) ;;
    *) echo "Note: $PREFIX/bin is not on your PATH; add it (e.g. export PATH=\"$PREFIX/bin:\$PATH\") so that 'git worker' and 'git nerve' work." ;;
esac
