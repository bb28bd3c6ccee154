#!/usr/bin/env bash
# Quick start: installs dependencies when missing, builds, and starts Redis (REDIS_URL when set,
# else a local redis-server on a free port with its data in .data/redis and its password in
# .data/redis-password), the API and two worker hosts (scripts/up.mjs; run as root, their sessions run
# as nobody). What npm prints goes to .data/logs/; the terminal shows it only on failure.
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
# .data holds secrets (the API key, the Redis password) and Redis's data: this user's only.
mkdir -p .data/logs
chmod 700 .data
# Runs a step with its output in .data/logs/<name>.log; on failure shows the log's end and stops.
quietly() {
  local name=$1
  shift
  if ! "$@" >".data/logs/$name.log" 2>&1; then
    tail -n 40 ".data/logs/$name.log" >&2
    echo "[up] $* failed; its whole output is in .data/logs/$name.log" >&2
    exit 1
  fi
}
if [ ! -d node_modules ]; then
  echo "[up] installing dependencies (npm ci; output in .data/logs/install.log)"
  quietly install npm ci --no-audit --no-fund
fi
echo "[up] building (output in .data/logs/build.log)"
quietly build npm run build
# exec: node is this process, so a Ctrl-C or kill reaches it, and it stops everything it started.
exec node scripts/up.mjs
