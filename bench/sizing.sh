#!/usr/bin/env bash
# The sizing figures of docs/production.md, measured with real processes: a 3-master Redis Cluster
# (redis-server from PATH), one slotproxy in front of it (dist/, `npm run build` first), then
#   - RSS at start (10 s after it serves: after the idle collection at 6 s) and back-end
#     connections per node at idle;
#   - RSS and back-end connections with N idle clients (each sent one GET), and with clients
#     blocked in BLPOP and subscribed;
#   - proxy CPU per request under redis-benchmark (SET and GET, -c 50, -P 1 and -P 16), as requests
#     per CPU-second of the proxy: what one core of its own gives.
# Usage: bash bench/sizing.sh [IDLE_CLIENTS (default 10000)] [BASE_PORT (default 21720)]
# Prints one "name value" line per figure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

clients=${1:-10000}
base=${2:-21720}
dir=$(mktemp -d "${TMPDIR:-/tmp}/slotproxy-sizing-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -n 1), $(redis-server --version | cut -d' ' -f3), node $(node --version)"
echo "load_average_at_start $(cut -d' ' -f1 /proc/loadavg)"
ports=("$((base + 1))" "$((base + 2))" "$((base + 3))")
proxy_port=$((base + 10))
metrics_port=$((base + 11))
for p in "${ports[@]}"; do
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file "$dir/nodes-$p.conf" \
    --save '' --appendonly no --dir "$dir" --logfile "$dir/redis-$p.log" &
  pids+=($!)
done
for p in "${ports[@]}"; do until redis-cli -p "$p" PING >/dev/null 2>&1; do sleep 0.1; done; done
redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-replicas 0 --cluster-yes >/dev/null
until [ "$(redis-cli -p "${ports[0]}" CLUSTER INFO | tr -d '\r' | grep cluster_state)" = cluster_state:ok ]; do sleep 0.2; done

# Clients of each node besides the one asking.
node_clients() {
  local total=0
  for p in "${ports[@]}"; do
    total=$((total + $(redis-cli -p "$p" INFO clients | tr -d '\r' | sed -n 's/^connected_clients://p') - 1))
  done
  echo "$total"
}
before=$(node_clients)

cat >"$dir/proxy.yaml" <<EOF
listen: 127.0.0.1:$proxy_port
mode: cluster
cluster:
  seeds: [127.0.0.1:${ports[0]}]
metrics:
  listen: 127.0.0.1:$metrics_port
limits:
  maxClients: 20000
log:
  level: warn
EOF
node --max-semi-space-size=16 --expose-gc dist/cmd/slotproxy.js start -c "$dir/proxy.yaml" >"$dir/proxy.out" 2>"$dir/proxy.log" &
proxy=$!
pids+=("$proxy")
until grep -q 'metrics at' "$dir/proxy.out"; do sleep 0.1; done
sleep 10

rss_mib() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$proxy/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$proxy/stat"; }
echo "rss_at_start_mib $(rss_mib)"
echo "backend_connections_idle $(($(node_clients) - before))"

# N clients that each send the command WORDS (# replaced by the client's number) and stay connected; ready once
# each has its reply (or, for a command that blocks, once it is sent and the proxy counts it).
hold() {
  node -e '
const net = require("net");
const [port, n, words, blocks] = [Number(process.argv[1]), Number(process.argv[2]), process.argv[3].split(" "), process.argv[4] === "blocks"];
const resp = (i) => { const args = words.map((w) => w.replaceAll("#", String(i))); return `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join(""); };
let answered = 0;
const sockets = [];
const done = () => { if (++answered === n) process.stdout.write("ready\n"); };
function open(i) {
  if (i >= n) return;
  const s = net.connect(port, "127.0.0.1", () => s.write(resp(i), blocks ? () => setTimeout(done, 100) : undefined));
  if (!blocks) s.once("data", done);
  s.on("error", (e) => { console.error(e.message); process.exit(1); });
  sockets.push(s);
  setImmediate(() => open(i + 1));
}
open(0);
setInterval(() => {}, 1000);
' "$proxy_port" "$1" "$2" "${4:-}" >"$dir/hold-$3.out" &
  pids+=($!)
  echo $! >"$dir/hold-$3.pid"
  until grep -q ready "$dir/hold-$3.out"; do sleep 0.2; done
}
release() { kill "$(cat "$dir/hold-$1.pid")"; }

rss0=$(rss_mib)
hold "$clients" 'GET size:#' idle
sleep 5
rss1=$(rss_mib)
echo "idle_clients $clients"
echo "rss_with_idle_clients_mib $rss1"
echo "rss_per_idle_client_kib $(awk -v a="$rss0" -v b="$rss1" -v n="$clients" 'BEGIN { printf "%.2f", (b - a) * 1024 / n }')"
echo "backend_connections_with_idle_clients $(($(node_clients) - before))"
release idle
sleep 2

# Blocked and subscribed clients: do they take back-end connections of their own?
hold 100 'BLPOP queue:# 0' blocked blocks
sleep 2
echo "backend_connections_with_100_blpop $(($(node_clients) - before))"
release blocked
sleep 2
hold 100 'SUBSCRIBE ch:#' subscribed
sleep 1
echo "backend_connections_with_100_subscribers $(($(node_clients) - before))"
release subscribed
sleep 2

# Requests per CPU-second of the proxy under redis-benchmark.
for pipeline in 1 16; do
  for test in set get; do
    t0=$(cpu_ticks)
    ops=$(redis-benchmark -p "$proxy_port" -c 50 -n 200000 -r 100000 -d 32 -P "$pipeline" -t "$test" --csv |
      tail -n 1 | cut -d, -f2 | tr -d '"')
    t1=$(cpu_ticks)
    cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz }')
    echo "ops_s_${test}_P${pipeline} $ops"
    echo "proxy_cpu_s_${test}_P${pipeline} $cpu"
    echo "requests_per_cpu_second_${test}_P${pipeline} $(awk -v c="$cpu" 'BEGIN { printf "%.0f", 200000 / c }')"
  done
done
echo "load_average_at_end $(cut -d' ' -f1 /proc/loadavg)"
echo "rss_after_load_mib $(rss_mib)"
echo "backend_connections_after_load $(($(node_clients) - before))"
