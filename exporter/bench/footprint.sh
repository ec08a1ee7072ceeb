#!/usr/bin/env bash
# Footprint and load of the real exporter process (bin/vgpu-exporter serve with the launcher's
# default JVM flags) on the benchmark node (io.vgpu.exporter.bench.BenchNode: CONTAINERS x DEVICES x
# PROCESSES v1.2 regions in /dev/shm), in the order of the footprint goals (README: Footprint):
#   1. startup to ready, then SINGLE_SCRAPES sequential gzip scrapes: one scrape's p50/p99 end to end
#   2. steady: two scrapers, each scraping every 15 s, for STEADY_SECONDS; RSS at the end
#   3. peak: LOAD_CONNECTIONS concurrent scrapers (wrk, gzip, as Prometheus asks) for LOAD_SECONDS;
#      p50/p99, errors, and the peak RSS (VmHWM: the kernel's high-water mark of the process)
# It ends with one summary line per run, and prints the load average so numbers can be judged.
#   exporter/bench/footprint.sh                                  100 x 8 x 4, 300 s steady, 50 x 60 s
#   CONTAINERS=200 STEADY_SECONDS=60 exporter/bench/footprint.sh
#   NMT=1 ...    adds -XX:NativeMemoryTracking=summary and prints jcmd's summary after the load
# Extra serve flags: FOOTPRINT_FLAGS; JVM flags: VGPU_EXPORTER_JAVA_OPTS (replaces the defaults).
set -euo pipefail
cd "$(dirname "$0")/../.."
CONTAINERS=${CONTAINERS:-100}
DEVICES=${DEVICES:-8}
PROCESSES=${PROCESSES:-4}
SINGLE_SCRAPES=${SINGLE_SCRAPES:-200}
STEADY_SECONDS=${STEADY_SECONDS:-300}
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
if [ "${NMT:-0}" = 1 ]; then
  export VGPU_EXPORTER_JAVA_OPTS="${VGPU_EXPORTER_JAVA_OPTS:-$(sed -n 's/^default_opts=(\(.*\)/\1/p;/^  -/p' bin/vgpu-exporter | tr -d '()' | tr '\n' ' ')} -XX:NativeMemoryTracking=summary"
fi
url="http://127.0.0.1:$port/metrics"
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
mib() { awk -v k="$1:" '$1==k{printf "%.1f", $2/1024}' "/proc/$pid/status"; }
rss() { awk '/^(VmRSS|RssAnon|RssFile|RssShmem):/{printf "%s %.1f MiB  ", $1, $2/1024}' "/proc/$pid/status"; }
bytes=$(curl -fs "$url" | wc -c)
gz=$(curl -fs -H 'Accept-Encoding: gzip' "$url" | wc -c)
echo "node: $CONTAINERS x $DEVICES x $PROCESSES, page $bytes bytes ($gz gzipped)"
echo "startup to ready: $ready_ms ms"

# 1. One scrape at a time, end to end (connection, request, gzip page), as curl sees it.
lat=$(for _ in $(seq 1 "$SINGLE_SCRAPES"); do
  curl -fs -o /dev/null -H 'Accept-Encoding: gzip' -w '%{time_total}\n' "$url"; done | sort -n)
pct() { awk -v p="$1" '{v[NR]=$1} END{i=int(NR*p/100+0.999); if(i<1)i=1; printf "%.1f", v[i]*1000}' <<<"$lat"; }
single_p50=$(pct 50); single_p99=$(pct 99)
echo "one scraper, $SINGLE_SCRAPES scrapes: p50 $single_p50 ms, p99 $single_p99 ms"
echo "idle after them: $(rss)"

# 2. Steady: two scrapers every 15 s (an HA pair of Prometheus servers).
steady_errors=0
if [ "$STEADY_SECONDS" -gt 0 ]; then
  end=$(( $(date +%s) + STEADY_SECONDS ))
  while [ "$(date +%s)" -lt "$end" ]; do
    curl -fs -o /dev/null -H 'Accept-Encoding: gzip' "$url" & first=$!
    curl -fs -o /dev/null -H 'Accept-Encoding: gzip' "$url" & second=$!
    wait "$first" || steady_errors=$((steady_errors + 1))
    wait "$second" || steady_errors=$((steady_errors + 1))
    sleep 15
  done
fi
steady=$(mib VmRSS)
echo "steady after ${STEADY_SECONDS}s of 2 scrapers every 15 s: $(rss)"

# 3. Peak: concurrent scrapers.
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
load_out=$(wrk -t2 -c"$LOAD_CONNECTIONS" -d"${LOAD_SECONDS}s" --timeout 10s -s "$lua" "$url" \
  | grep -E "requests:|latency:|Requests/sec")
rm -f "$lua"
echo "$LOAD_CONNECTIONS scrapers for ${LOAD_SECONDS}s:"
echo "$load_out" | sed 's/^/  /'
peak=$(mib VmHWM)
echo "after load: $(rss) peak VmHWM $peak MiB"
if [ "${NMT:-0}" = 1 ]; then
  "$JAVA_HOME/bin/jcmd" "$pid" VM.native_memory summary | grep -E "^Total|^-|committed" | head -40
  "$JAVA_HOME/bin/jcmd" "$pid" GC.run >/dev/null
  echo "heap after a full GC (live set):"
  "$JAVA_HOME/bin/jcmd" "$pid" GC.heap_info | sed 1d
fi
sleep 10
echo "10 s after load: $(rss)"
load_p50=$(awk '/^p50 /{print $3}' <<<"$load_out")
load_p99=$(awk '/^p99 /{print $3}' <<<"$load_out")
errs=$(awk -F'[:,]' '/^requests:/{print $4+$6}' <<<"$load_out")
echo "SUMMARY ${CONTAINERS}x${DEVICES}x${PROCESSES}: page ${bytes} B; one scrape p50 ${single_p50} ms; RSS steady ${steady} MiB (scrape errors ${steady_errors}); ${LOAD_CONNECTIONS} scrapers p50 ${load_p50} ms p99 ${load_p99} ms errors ${errs}; RSS peak ${peak} MiB; load average $(cut -d' ' -f1-3 /proc/loadavg)"
