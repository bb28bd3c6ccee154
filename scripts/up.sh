#!/usr/bin/env bash
# Quick start: installs dependencies when missing, builds, and starts Redis (REDIS_URL when set,
# else a local redis-server on a free port with its data in .data/redis).
set -euo pipefail
cd "$(dirname "$0")/.."
export TURBO_TELEMETRY_DISABLED=1
[ -d node_modules ] || npm ci --no-audit --no-fund
npm run build >/dev/null
exec node scripts/up.mjs
