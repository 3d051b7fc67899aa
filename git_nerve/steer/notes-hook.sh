#!/bin/sh
# git-nerve's notes hook gate (git_nerve/steer/pending.py): what Claude Code runs after every tool call.
#
#   sh notes-hook.sh MARKER STOP_FILE COMMAND [ARGS...]
#
# MARKER is <git-common-dir>/nerve/notes-pending/<task>, set whenever a note or a stop is queued for the
# task (and kept while a delivered note awaits the commit that acts on it); STOP_FILE is the runner's
# <git-dir>/nerve/stop-request. When neither exists there is nothing to hand over: the hook input is read
# and dropped (the CLI writing it never meets a closed pipe), nothing is printed, exit 0, and no Python
# starts. Otherwise COMMAND (`git-nerve notes --hook claude`) runs in our place with the input unread.
# POSIX sh only: dash, bash, busybox ash, macOS /bin/sh.
if [ -e "$1" ] || [ -e "$2" ]; then
	shift 2
	exec "$@"
fi
cat >/dev/null 2>&1
exit 0
