#!/bin/sh
# The built-in demo session (see the contract): reads SESSION_METADATA, runs for `durationMs`
# milliseconds (forever when absent) printing a line a second, then exits with `exitCode` (default 0).
# POSIX sh with coreutils' sleep, and no command substitution on the way in: one small process per
# session, started in about a millisecond.
meta=${SESSION_METADATA:-'{}'}

# field NAME: sets $value to the non-negative integer of "NAME" in the metadata (empty when absent).
field() {
  value=
  case $meta in *"\"$1\""*) ;; *) return 0 ;; esac
  rest=${meta#*\"$1\"}
  rest=${rest#*:}
  rest=${rest#"${rest%%[!	 ]*}"}
  value=${rest%%[!0-9]*}
  case ${rest#"$value"} in [.eE]*) value=bad ;; esac
  [ -n "$value" ] || value=bad
}

session="${USER_ID:-?} session ${SESSION_ID:-?} fence ${FENCE:-?}"
field durationMs; duration=$value
field exitCode; code=$value
if [ "$duration" = bad ]; then
  echo "demo session: ignoring SESSION_METADATA: durationMs must be a non-negative integer" >&2
  duration=
fi
if [ "$code" = bad ] || { [ -n "$code" ] && [ "$code" -gt 255 ]; }; then
  echo "demo session: ignoring SESSION_METADATA: exitCode must be an integer from 0 to 255" >&2
  code=
fi

# Ready at once: say so on SESSION_NOTIFY_FD (a demo has no endpoint to announce). Silently skipped
# when the descriptor is not open (the script run by hand).
case ${SESSION_NOTIFY_FD:-} in
  [0-9]) { eval "echo '{\"ready\": true}' >&$SESSION_NOTIFY_FD"; } 2>/dev/null ;;
esac

napper=
trap 'echo "demo: $session stopping on SIGTERM"; [ -z "$napper" ] || kill "$napper" 2>/dev/null; exit 143' TERM
# `sleep & wait`: a SIGTERM interrupts the wait at once (the shell runs traps only between commands).
nap() {
  sleep "$1" &
  napper=$!
  wait "$napper"
  napper=
}

if [ -z "$duration" ]; then
  echo "demo: $session started; runs until stopped"
  elapsed=0
  while :; do
    nap 1
    elapsed=$((elapsed + 1))
    echo "demo: $session alive for $elapsed s"
  done
fi

echo "demo: $session started; runs $duration ms"
elapsed=0
while [ $((duration - elapsed * 1000)) -ge 1000 ]; do
  nap 1
  elapsed=$((elapsed + 1))
  echo "demo: $session alive for $elapsed s"
done
rest=$((duration - elapsed * 1000))
if [ "$rest" -gt 0 ]; then
  ms=$((rest % 1000))
  case ${#ms} in 1) ms=00$ms ;; 2) ms=0$ms ;; esac
  nap "$((rest / 1000)).$ms"
fi
echo "demo: $session done"
exit "${code:-0}"
