#!/usr/bin/env bash
# Idempotent machine setup for slotproxy on Debian, run before the sandbox and
# the tests: installs redis-server and redis-cli (and nutcracker when
# SLOTPROXY_NEED_NUTCRACKER=1, redis-sentinel when SLOTPROXY_NEED_SENTINEL=1,
# python3-redis when SLOTPROXY_NEED_PYREDIS=1, chromium for the console's browser tests when
# SLOTPROXY_NEED_CHROMIUM=1, promtool for the alert rules' test when SLOTPROXY_NEED_PROMTOOL=1) if
# missing, then node_modules if stale.
# Everything it prints goes to stderr, so callers' stdout stays clean.
set -euo pipefail

log() { echo "setup: $*" >&2; }

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# nutcracker lives in /usr/sbin, which is not on every user's PATH.
have() {
  command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]
}

SUDO=()
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
fi

# Stops a service the package's postinst may have started (Debian starts
# redis-server on 6379); our servers use their own ports.
stop_service() {
  local name=$1 pidfile=$2
  if command -v service >/dev/null 2>&1; then
    ${SUDO[@]+"${SUDO[@]}"} service "$name" stop >/dev/null 2>&1 || true
  fi
  if [ -s "$pidfile" ]; then
    ${SUDO[@]+"${SUDO[@]}"} kill "$(cat "$pidfile")" >/dev/null 2>&1 || true
  fi
}

packages=()
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  packages+=(redis-server redis-tools)
fi
if [ "${SLOTPROXY_NEED_NUTCRACKER:-0}" = 1 ] && ! have nutcracker; then
  packages+=(nutcracker)
fi
# The Sentinel failover tests run redis-sentinel processes (Debian's redis-sentinel package).
if [ "${SLOTPROXY_NEED_SENTINEL:-0}" = 1 ] && ! have redis-sentinel; then
  packages+=(redis-sentinel)
fi
# redis-py for the other-language client test: Debian's python3-redis, for Debian's python3.
if [ "${SLOTPROXY_NEED_PYREDIS:-0}" = 1 ] && ! /usr/bin/python3 -c 'import redis' >/dev/null 2>&1; then
  packages+=(python3-redis)
fi
# The console's tests drive Debian's chromium headless (test/helpers/browser.ts).
if [ "${SLOTPROXY_NEED_CHROMIUM:-0}" = 1 ] && ! have chromium; then
  packages+=(chromium)
fi
# config/alert-rules.yml is checked with promtool (Debian's prometheus package).
if [ "${SLOTPROXY_NEED_PROMTOOL:-0}" = 1 ] && ! have promtool; then
  packages+=(prometheus)
fi

if [ ${#packages[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    log "missing ${packages[*]} and apt-get is not available; install them by hand"
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ] && [ ${#SUDO[@]} -eq 0 ]; then
    log "missing ${packages[*]}; not root and sudo is not available; install them by hand"
    exit 1
  fi
  log "installing Debian packages: ${packages[*]}"
  ${SUDO[@]+"${SUDO[@]}"} apt-get update -qq >&2
  ${SUDO[@]+"${SUDO[@]}"} env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${packages[@]}" >&2
  for pkg in "${packages[@]}"; do
    case $pkg in
      redis-server) stop_service redis-server /run/redis/redis-server.pid ;;
      nutcracker) stop_service nutcracker /run/nutcracker/nutcracker.pid ;;
      redis-sentinel) stop_service redis-sentinel /run/sentinel/redis-sentinel.pid ;;
      prometheus) stop_service prometheus /run/prometheus/prometheus.pid ;;
    esac
  done
fi

for tool in redis-server redis-cli; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is still not on PATH after install"; exit 1; }
done
log "$(redis-server --version | cut -d' ' -f1-3)"

node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 20 ]; then
  log "warning: Node.js >= 20 is required, found $(node --version)"
fi

# node_modules/.package-lock.json is npm's record of what is installed.
if [ ! -d node_modules ] || [ ! -f node_modules/.package-lock.json ] ||
  [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing node modules (npm ci)"
  # npm 11 leaves some platform-specific optional packages (jest's @unrs/resolver-binding-*) out
  # of the lock file and then refuses `npm ci`; `npm install` still installs the locked versions.
  if ! npm ci --no-audit --no-fund >&2; then
    log "npm ci refused the lock file; falling back to npm install (locked versions)"
    npm install --no-audit --no-fund >&2
  fi
else
  log "node_modules up to date"
fi
