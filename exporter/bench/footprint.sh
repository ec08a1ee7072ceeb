#!/usr/bin/env bash
# Footprint and load of the real exporter process (bin/vgpu-exporter serve, the launcher's default
# JVM flags) on the benchmark node (io.vgpu.exporter.bench.BenchNode: CONTAINERS x DEVICES x
# PROCESSES v1.2 regions in /dev/shm): startup to ready, RSS after 5 scrapes and 10 s idle (with
# its RssAnon/RssFile/RssShmem split), then LOAD_SECONDS of wrk with LOAD_CONNECTIONS concurrent
# scrapers (gzip, as Prometheus asks) and RSS after it.
#   exporter/bench/footprint.sh                      100 x 8 x 4, 50 connections, 60 s
#   CONTAINERS=200 LOAD_SECONDS=20 exporter/bench/footprint.sh
# Extra serve flags: FOOTPRINT_FLAGS; JVM flags: VGPU_EXPORTER_JAVA_OPTS (replaces the defaults).
set -euo pipefail
cd "$(dirname "$0")/../.."
CONTAINERS=${CONTAINERS:-100}
DEVICES=${DEVICES:-8}
PROCESSES=${PROCESSES:-4}
LOAD_SECONDS=${LOAD_SECONDS:-60}
LOAD_CONNECTIONS=${LOAD_CONNECTIONS:-50}
command -v wrk >/dev/null || { echo "footprint: wrk missing (make deps)"; exit 1; }
[ -f exporter/target/exporter.jar ] || { echo "footprint: exporter not built (make build)"; exit 1; }
if [ -z "${JAVA_HOME:-}" ]; then
  for j in /usr/lib/jvm/temurin-25*; do [ -x "$j/bin/java" ] && export JAVA_HOME="$j" && break; done
fi
[ -n "${JAVA_HOME:-}" ] || { echo "footprint: set JAVA_HOME to a JDK 25"; exit 1; }
cp_file=$(mktemp)
./mvnw -B -ntp -o -q -pl exporter test-compile dependency:build-classpath \
  -Dmdep.outputFile="$cp_file" -Dmdep.includeScope=test >/dev/null
java_bin="$JAVA_HOME/bin/java"
base=/dev/shm; [ -d "$base" ] || base=/tmp
work=$(mktemp -d "$base/vgpu-footprint.XXXXXX")
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work" "$cp_file"; }
trap cleanup EXIT
"$java_bin" -cp "exporter/target/test-classes:exporter/target/classes:$(cat "$cp_file")" \
  io.vgpu.exporter.bench.BenchNode "$work/containers" "$CONTAINERS" "$DEVICES" "$PROCESSES"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_ns=$(date +%s%N)
# shellcheck disable=SC2086
bin/vgpu-exporter serve --path.cache-root="$work/containers" --kubernetes=false --nvml=false \
  --node-name=bench --web.listen-address=127.0.0.1 --web.listen-port="$port" --log.level=warn \
  ${FOOTPRINT_FLAGS:-} > "$work/exporter.log" 2>&1 &
pid=$!
until curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || { echo "footprint: exporter exited"; cat "$work/exporter.log"; exit 1; }
  sleep 0.02
done
ready_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
rss() { awk '/^(VmRSS|RssAnon|RssFile|RssShmem):/{printf "%s %.1f MiB  ", $1, $2/1024}' "/proc/$pid/status"; }
bytes=$(curl -fs "http://127.0.0.1:$port/metrics" | wc -c)
for _ in 1 2 3 4; do curl -fs -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port/metrics" >/dev/null; done
sleep 10
echo "node: $CONTAINERS x $DEVICES x $PROCESSES, page $bytes bytes"
echo "startup to ready: $ready_ms ms"
echo "idle after 5 scrapes: $(rss)"
if [ "$LOAD_SECONDS" -gt 0 ]; then
  lua=$(mktemp --suffix=.lua)
  cat >"$lua" <<'LUA'
wrk.headers["Accept-Encoding"] = "gzip"
wrk.headers["Accept"] = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
done = function(summary, latency, requests)
  io.write(string.format("requests: %d, non-2xx: %d, socket errors: %d\n", summary.requests,
    summary.errors.status, summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
  for _, p in ipairs({50, 90, 99, 99.9}) do
    io.write(string.format("p%g latency: %.2f ms\n", p, latency:percentile(p) / 1000))
  end
end
LUA
  wrk -t2 -c"$LOAD_CONNECTIONS" -d"${LOAD_SECONDS}s" --timeout 10s -s "$lua" "http://127.0.0.1:$port/metrics" \
    | grep -E "requests:|latency:|Requests/sec"
  rm -f "$lua"
  echo "after load: $(rss)"
  sleep 10
  echo "10 s after load: $(rss)"
fi
