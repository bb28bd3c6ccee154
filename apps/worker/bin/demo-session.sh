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

# As a session (its SESSION_DIR given), with socat on the PATH: a small page on 127.0.0.1:8080 of the
# session's own network, which the session proxy opens (`cq open <user>`). socat answers each connection
# with a small shell script (written to SESSION_DIR) that reads the request's head and prints the page.
# Returns 1, serving nothing, where it cannot (no socat, or the port taken: sessions on the host's
# network); the demo runs on.
web=
serve_page() {
  [ -n "${SESSION_DIR:-}" ] && [ -w "$SESSION_DIR" ] && command -v socat >/dev/null 2>&1 || return 1
  cat >"$SESSION_DIR/.demo-page.sh" <<'PAGE'
while read -r line; do [ "$line" = "$(printf '\r')" ] && break; done
printf 'HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nConnection: close\r\n\r\n'
printf '<!doctype html><html><head><title>cq demo session</title></head><body><h1>A demo session</h1>'
printf '<p>User <b>%s</b>, session <code>%s</code>, fence %s; this page was made at %s UTC.</p>' \
  "$USER_ID" "$SESSION_ID" "$FENCE" "$(date -u +%H:%M:%S)"
printf '<p>You reached it through the API: the session proxy, on the session&#39;s own origin.</p></body></html>\n'
PAGE
  export USER_ID SESSION_ID FENCE
  socat TCP-LISTEN:8080,bind=127.0.0.1,reuseaddr,fork "EXEC:/bin/sh $SESSION_DIR/.demo-page.sh" \
    </dev/null >/dev/null 2>&1 &
  web=$!
  # Listening once a connection gets through (at most a second), unless socat gave up first.
  tries=0
  while [ "$tries" -lt 100 ]; do
    kill -0 "$web" 2>/dev/null || { web=; return 1; }
    # (and socat still there: on the host's network the port may be another session's, which answered)
    socat -u OPEN:/dev/null TCP:127.0.0.1:8080 2>/dev/null && sleep 0.01 && kill -0 "$web" 2>/dev/null && return 0
    tries=$((tries + 1))
    sleep 0.01
  done
  return 1
}

# Ready: say so on SESSION_NOTIFY_FD, with the page's port when it serves one. Silently skipped when the
# descriptor is not open (the script run by hand).
case ${SESSION_NOTIFY_FD:-} in
  [0-9])
    if serve_page; then ready='{"ready": true, "port": 8080}'; else ready='{"ready": true}'; fi
    { eval "echo '$ready' >&$SESSION_NOTIFY_FD"; } 2>/dev/null
    ;;
esac

napper=
trap 'echo "demo: $session stopping on SIGTERM"; [ -z "$napper" ] || kill "$napper" 2>/dev/null; [ -z "$web" ] || kill "$web" 2>/dev/null; exit 143' TERM
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
[ -z "$web" ] || kill "$web" 2>/dev/null
exit "${code:-0}"
