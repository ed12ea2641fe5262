#!/bin/sh
# Claude Code's SessionStart hook in remote mode, as `episodes claude-code install --api URL` writes it:
#
#   sh session_start.sh URL KEY_ENV SECONDS LOG
#
# A session start waits for this hook, so it starts no Python: curl passes the hook's JSON (stdin) to
# `episodes api` (POST URL, jobs/service/routes/claude_code.py) and prints the answer, the block Claude
# Code adds to the session's context. It fails open: whatever goes wrong (no key, the service down or
# slow, a refused key) it prints nothing, exits 0 within SECONDS and appends one line to LOG.
# The key is read from the variable named KEY_ENV and reaches curl through a pipe as a config line
# (printf is a shell builtin), so it never appears in a process's arguments.
url=$1 key_env=$2 seconds=$3 log=$4
umask 077  # the log, if this creates it, is the owner's only (as the Python hook's)

note() {
    printf '%s pid=%s SessionStart: %s\n' "$(date +%Y-%m-%dT%H:%M:%S%z)" "$$" "$1" >>"$log" 2>/dev/null
}

case $key_env in
    ''|[0-9]*|*[!A-Za-z0-9_]*) note "failed open: KEY_ENV '$key_env' is not a variable name"; exit 0 ;;
esac
eval "key=\${$key_env:-}"
if [ -z "$key" ]; then
    note "failed open: no API key in \$$key_env; set it in the environment Claude Code runs in"
    exit 0
fi
# Where the session starts in git (issue 49), sent beside the event for the service to sort other branches'
# sessions by: HEAD and its branch (one `git rev-parse`) and the remote's URL without credentials (one `git
# config`: origin, else the first remote). git runs in the folder Claude Code runs the hook in (the session's),
# reading only (no fsmonitor, hooks or optional locks); outside git, or in a repository with no commit, none.
set --
if out=$(git -c core.fsmonitor=false -c core.hooksPath=/dev/null --no-optional-locks \
             rev-parse HEAD --abbrev-ref HEAD 2>/dev/null); then
    head=${out%%
*} branch=${out#*
}
    set -- -H "X-Episodes-Head: $head"
    [ "$branch" = HEAD ] || set -- "$@" -H "X-Episodes-Branch: $branch"
    repo=$(git -c core.fsmonitor=false --no-optional-locks config --get-regexp '^remote\..*\.url$' 2>/dev/null |
           sed -n -e 's#^\([^ ]* [A-Za-z][A-Za-z0-9+.-]*://\)[^/@]*@#\1#' \
                  -e '/^remote\.origin\.url /{s/^[^ ]* //p;q;}' -e '1h' -e '${x;s/^[^ ]* //p;}')
    [ -z "$repo" ] || set -- "$@" -H "X-Episodes-Repo: $repo"
fi
# fd 4: the hook's stdout (what Claude Code reads); fd 6: its stdin (the event; Claude Code may pass a socket,
# which cannot be opened again by name, so curl reads it as its own stdin). curl reads its config (the key)
# by name from the pipe printf writes to (fd 5); its errors are captured for the log.
exec 4>&1 6<&0
if err=$(printf 'header = "Authorization: Bearer %s"\n' "$key" |
         curl -sS --fail --connect-timeout 2 --max-time "$seconds" -K /dev/fd/5 \
              -H 'Content-Type: application/json' "$@" --data-binary @- "$url" 5<&0 0<&6 2>&1 >&4); then
    note "ok (remote, curl)"
else
    note "failed open: ${err:-curl exited with an error}"
fi
exit 0
