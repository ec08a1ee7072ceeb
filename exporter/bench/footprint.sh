#!/usr/bin/env bash
# Footprint and load of the real exporter process (bin/vgpu-exporter serve with the launcher's
# default JVM flags, --kubernetes=false --nvml=false) on benchmark nodes written by
# io.vgpu.exporter.bench.BenchNode (CONTAINERS x DEVICES x PROCESSES v1.2 regions in /dev/shm), in
# the order of the footprint goals (README: Footprint). Per node (ROWS, default "100 200"):
#   1. startup to ready
#   2. one scraper on one kept-alive connection, gzip, as Prometheus scrapes: SINGLE_SCRAPES
#      scrapes paced at SINGLE_RATE per second (default 4: the exporter idles between scrapes, as
#      it does between Prometheus' scrapes), p50/p99 end to end; then as many back to back, p50/p99
#      and the exporter's CPU time per scrape (/proc/<pid>/stat utime+stime), which a loaded
#      machine does not inflate the way it does latency. The paced p50 is the one judged against
#      the goal; on the 2-CPU development VM the two differ by a few ms either way
#   3. steady: two scrapers (an HA pair of Prometheus servers), each every 15 s, for
#      STEADY_SECONDS; then RSS ("steady") and its parts (anonymous, file, shared memory)
#   4. peak: LOAD_CONNECTIONS concurrent scrapers (wrk, Prometheus' Accept and gzip headers) for
#      LOAD_SECONDS: p50/p99, errors, requests/s, CPU per request; then the peak RSS (VmHWM: the
#      kernel's high-water mark of the process since it started, startup included)
# Each node comes with a procfs fixture (BenchNode -Dbench.procfs, served with --path.procfs): every
# slot's process is alive and maps ~100 KB, so the background evidence pass reads what it reads on a
# real node. The exporter runs in a memory cgroup of its own where the script may create one (root;
# cgroup v1 or v2): its charge is what the kubelet compares with the container's limit, which the
# tenants' region pages (charged to the tenants that wrote them) are not part of, though VmRSS counts
# them. "cg" columns: usage at the steady point and the cgroup's high-water mark at the end.
# Heap allocated per scrape comes from the GC log (JDK_JAVA_OPTIONS adds -Xlog:gc; the java launcher
# prepends it to the launcher's flags, which stay as they are). Ends with one table for README.
#   exporter/bench/footprint.sh                    the issue's protocol: 300 s steady, 50 x 60 s
#   FOOTPRINT_QUICK=1 exporter/bench/footprint.sh  iteration: 100 containers, 30 s steady, 50 x 15 s
#   BUSY_MS=100 ... a busy node: BenchNode's busy mode moves every process's memory use, last
#                 kernel time and limiter/OOM counters every BUSY_MS while the row runs, so every
#                 paced scrape finds ~60 % of the page changed (a static node lets the exporter
#                 replay the deflated bytes of unchanged families; this is the other end)
#   NMT=1 ...     adds native memory tracking (costs ~2 MiB itself) and prints where the memory
#                 goes after the load: jcmd VM.native_memory, smaps_rollup, the live heap
# Extra serve flags: FOOTPRINT_FLAGS; JVM flags: VGPU_EXPORTER_JAVA_OPTS (replaces the defaults).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${FOOTPRINT_QUICK:-0}" = 1 ]; then
  ROWS=${ROWS:-100} SINGLE_SCRAPES=${SINGLE_SCRAPES:-100} STEADY_SECONDS=${STEADY_SECONDS:-30}
  LOAD_SECONDS=${LOAD_SECONDS:-15}
fi
ROWS=${ROWS:-100 200}
DEVICES=${DEVICES:-8}
PROCESSES=${PROCESSES:-4}
SINGLE_SCRAPES=${SINGLE_SCRAPES:-200}
SINGLE_RATE=${SINGLE_RATE:-4}
STEADY_SECONDS=${STEADY_SECONDS:-300}
LOAD_SECONDS=${LOAD_SECONDS:-60}
LOAD_CONNECTIONS=${LOAD_CONNECTIONS:-50}
command -v wrk >/dev/null || { echo "footprint: wrk missing (make deps)"; exit 1; }
[ -f exporter/target/exporter.jar ] || { echo "footprint: exporter not built (make build)"; exit 1; }
. scripts/lib.sh
need_jdk25
cp_file=$(mktemp)
./mvnw -B -ntp -o -q -pl exporter test-compile dependency:build-classpath \
  -Dmdep.outputFile="$cp_file" -Dmdep.includeScope=test >/dev/null
java_bin="$JAVA_HOME/bin/java"
base=/dev/shm; [ -d "$base" ] || base=/tmp
work=$(mktemp -d "$base/vgpu-footprint.XXXXXX")
pid=""
busy_pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  if [ -n "$busy_pid" ]; then kill "$busy_pid" 2>/dev/null || true; wait "$busy_pid" 2>/dev/null || true; fi
  rm -rf "$work" "$cp_file"
  if [ -n "$cg_dir" ]; then rmdir "$cg_dir" 2>/dev/null || true; fi
}
trap cleanup EXIT
lua="$work/prometheus.lua"
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

# A memory cgroup for the exporter, under this shell's own (v1: the memory hierarchy; v2: the
# unified one, where the parent must delegate the memory controller). Empty where neither works.
cg_dir=""
cg_version=""
make_cgroup() {
  local own
  own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  if [ -n "$own" ] && [ -w "/sys/fs/cgroup/memory$own" ]; then
    cg_dir="/sys/fs/cgroup/memory$own/vgpu-footprint-$$" cg_version=1
  else
    own=$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
    if [ -n "$own" ] && grep -qw memory "/sys/fs/cgroup$own/cgroup.subtree_control" 2>/dev/null; then
      cg_dir="/sys/fs/cgroup$own/vgpu-footprint-$$" cg_version=2
    fi
  fi
  if [ -n "$cg_dir" ] && ! mkdir "$cg_dir" 2>/dev/null; then cg_dir="" cg_version=""; fi
}
# MiB charged now (usage) and at most since the cgroup was made (peak): v1 usage_in_bytes and
# max_usage_in_bytes; v2 memory.current and memory.peak (kernel 5.19+).
cg_mib() {
  local f
  [ -n "$cg_dir" ] || { echo "n/a"; return; }
  case "$cg_version$1" in
    1usage) f=memory.usage_in_bytes ;; 1peak) f=memory.max_usage_in_bytes ;;
    2usage) f=memory.current ;; 2peak) f=memory.peak ;;
  esac
  [ -r "$cg_dir/$f" ] && awk '{printf "%.1f", $1/1048576}' "$cg_dir/$f" || echo "n/a"
}
make_cgroup
mib() { awk -v k="$1:" '$1==k{printf "%.1f", $2/1024}' "/proc/$pid/status"; }
rss() { awk '/^(VmRSS|RssAnon|RssFile|RssShmem):/{printf "%s %.1f MiB  ", $1, $2/1024}' "/proc/$pid/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
ticks_per_s=$(getconf CLK_TCK)
# MB allocated on the heap so far: at each collection, what was allocated since the last one
# (heap before it minus heap after the previous one), from -Xlog:gc's "before->after(committed)".
heap_alloc_mb() {
  sed -nE 's/.* ([0-9]+)M->([0-9]+)M\(.*/\1 \2/p' "$1" |
    awk '{ if (n++) s += $1 - prev; else s += $1; prev = $2 } END { print s + 0 }'
}
# How fast this VM is right now (exporter/src/test/java/io/vgpu/exporter/bench/SpeedProbe.java):
# a fixed native deflate whose time moves only with the machine, printed beside the latencies.
speed_probe() {
  "$java_bin" -Xshare:auto -XX:TieredStopAtLevel=1 -cp exporter/target/test-classes \
    io.vgpu.exporter.bench.SpeedProbe
}
pct() { awk -v p="$1" '{v[NR]=$1} END{i=int(NR*p/100+0.999); if(i<1)i=1; printf "%.1f", v[i]*1000}'; }
load_at_start=$(cut -d' ' -f1-3 /proc/loadavg)
table=()
row_format='%-15s %8s %6s %11s %11s %7s %9s %9s %12s %13s %6s %4s %12s'

run_row() {
  local containers=$1 node="$work/node-$1" gclog="$work/gc-$1.log" port url
  local procfs="$work/proc-$1"
  "$java_bin" -Dbench.procfs="$procfs" \
    -cp "exporter/target/test-classes:exporter/target/classes:$(cat "$cp_file")" \
    io.vgpu.exporter.bench.BenchNode "$node" "$containers" "$DEVICES" "$PROCESSES"
  local label="${containers}x${DEVICES}x${PROCESSES}"
  if [ -n "${BUSY_MS:-}" ]; then
    "$java_bin" -XX:+UseSerialGC -Xmx64m -XX:TieredStopAtLevel=1 -Dbench.busy-ms="$BUSY_MS" \
      -cp "exporter/target/test-classes:exporter/target/classes:$(cat "$cp_file")" \
      io.vgpu.exporter.bench.BenchNode "$node" "$containers" "$DEVICES" "$PROCESSES" busy &
    busy_pid=$!
    label="$label busy"
  fi
  port=$(free_port)
  url="http://127.0.0.1:$port/metrics"
  local extra="-Xlog:gc:file=$gclog"
  [ "${NMT:-0}" = 1 ] && extra="$extra -XX:NativeMemoryTracking=summary"
  local start_ns; start_ns=$(date +%s%N)
  # shellcheck disable=SC2086
  # A fresh cgroup per row (its peak counts from this start); the exporter joins it before exec.
  if [ -n "$cg_dir" ]; then rmdir "$cg_dir" 2>/dev/null || true; mkdir "$cg_dir"; fi
  JDK_JAVA_OPTIONS="$extra" sh -c '[ -z "$1" ] || echo $$ >"$1/cgroup.procs"; shift; exec "$@"' \
    _ "$cg_dir" bin/vgpu-exporter serve --path.cache-root="$node" --path.procfs="$procfs" \
    --kubernetes=false --nvml=false --node-name=bench --web.listen-address=127.0.0.1 --web.listen-port="$port" \
    --log.level=warn ${FOOTPRINT_FLAGS:-} >"$work/exporter-$containers.log" 2>&1 &
  pid=$!
  await_http "http://127.0.0.1:$port/readyz" 600 "$pid" 0.02 \
    || { echo "footprint: exporter not ready"; cat "$work/exporter-$containers.log"; exit 1; }
  local ready_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))

  # 2. One scraper on a kept-alive connection, as Prometheus scrapes. Warm-up first (the JIT, and
  # the first attribution pass, whose families the page lacks right after ready).
  local args=() i
  for i in $(seq 1 "$SINGLE_SCRAPES"); do args+=(-o /dev/null "$url"); done
  curl -fs -H 'Accept-Encoding: gzip' "${args[@]:0:150}" # 50 warm-up scrapes (3 words each)
  # Then until the first background evidence pass has judged the slots (before it every slot is
  # "unknown" and the page lacks the live processes' series, ~10 % of it) and the first
  # attribution pass has reconciled (before it the page lacks its families, ~12 %: warm-up
  # scrapes can end first). At 200 containers some slots stay unknown: 800 processes' maps
  # (100 KB each) pass the evidence pass's 64 MiB read budget.
  local counts unknown judged attributed waited=0
  while :; do
    counts=$(curl -fs "$url" | awk '/^vgpu_container_processes\{/ {
        if ($0 ~ /state="unknown"/) u += $NF; else j += $NF }
        /^vgpu_container_over_sm_limit_seconds_total\{/ { a++ }
        END {print u + 0, j + 0, a + 0}')
    read -r unknown judged attributed <<<"$counts"
    { [ "$unknown" = 0 ] || [ "$judged" != 0 ]; } && [ "$attributed" != 0 ] && break
    waited=$((waited + 1))
    [ "$waited" -le 60 ] || { echo "footprint: slots not judged or not reconciled after 30 s"; exit 1; }
    sleep 0.5
  done
  local bytes gz
  bytes=$(curl -fs "$url" | wc -c)
  gz=$(curl -fs -H 'Accept-Encoding: gzip' "$url" | wc -c)
  echo
  echo "== node $containers x $DEVICES x $PROCESSES: page $bytes bytes ($gz gzipped); startup to ready $ready_ms ms"
  echo "slots unknown/judged when measuring: $unknown/$judged"
  local probe_before probe_after
  probe_before=$(speed_probe)
  echo "speed probe (SpeedProbe: median ms to deflate its fixed 2.8 MB page): $probe_before"
  local t0 a0 lat
  lat=$(curl -fs -H 'Accept-Encoding: gzip' --rate "$SINGLE_RATE/s" -w '%{time_total}\n' "${args[@]}" | sort -n)
  local paced_p50 paced_p99
  paced_p50=$(pct 50 <<<"$lat"); paced_p99=$(pct 99 <<<"$lat")
  echo "one scraper, $SINGLE_SCRAPES scrapes at $SINGLE_RATE/s: p50 $paced_p50 ms, p99 $paced_p99 ms"
  t0=$(cpu_ticks); a0=$(heap_alloc_mb "$gclog")
  lat=$(curl -fs -H 'Accept-Encoding: gzip' -w '%{time_total}\n' "${args[@]}" | sort -n)
  local cpu_ms alloc_kb single_p50 single_p99
  cpu_ms=$(awk -v d=$(( $(cpu_ticks) - t0 )) -v n="$SINGLE_SCRAPES" -v hz="$ticks_per_s" 'BEGIN{printf "%.1f", d*1000/hz/n}')
  alloc_kb=$(( ($(heap_alloc_mb "$gclog") - a0) * 1024 / SINGLE_SCRAPES ))
  single_p50=$(pct 50 <<<"$lat"); single_p99=$(pct 99 <<<"$lat")
  echo "one scraper, $SINGLE_SCRAPES scrapes back to back: p50 $single_p50 ms, p99 $single_p99 ms; exporter CPU $cpu_ms ms/scrape (background passes included), heap allocated ~$alloc_kb KB/scrape"
  probe_after=$(speed_probe)
  echo "speed probe after them: $probe_after"
  echo "after them: $(rss)threads $(awk '/^Threads:/{print $2}' "/proc/$pid/status")"

  # 3. Steady: two scrapers every 15 s.
  local steady_errors=0 end first second
  end=$(( $(date +%s) + STEADY_SECONDS ))
  while [ "$(date +%s)" -lt "$end" ]; do
    curl -fs -o /dev/null -H 'Accept-Encoding: gzip' "$url" & first=$!
    curl -fs -o /dev/null -H 'Accept-Encoding: gzip' "$url" & second=$!
    wait "$first" || steady_errors=$((steady_errors + 1))
    wait "$second" || steady_errors=$((steady_errors + 1))
    sleep 15
  done
  local steady steady_cg; steady=$(mib VmRSS); steady_cg=$(cg_mib usage)
  echo "steady after ${STEADY_SECONDS} s of 2 scrapers every 15 s: $(rss)cgroup $steady_cg MiB, scrape errors $steady_errors"

  # 4. Peak: concurrent scrapers.
  local load_out
  t0=$(cpu_ticks)
  load_out=$(wrk -t2 -c"$LOAD_CONNECTIONS" -d"${LOAD_SECONDS}s" --timeout 10s -s "$lua" "$url" \
    | grep -E "requests:|latency:|Requests/sec")
  local load_ticks=$(( $(cpu_ticks) - t0 ))
  local peak peak_cg; peak=$(mib VmHWM); peak_cg=$(cg_mib peak)
  local reqs rps load_p50 load_p99 errs cpu_req
  reqs=$(awk -F'[:,]' '/^requests:/{print $2+0}' <<<"$load_out")
  rps=$(awk '/^Requests\/sec:/{printf "%.0f", $2}' <<<"$load_out")
  load_p50=$(awk '/^p50 /{print $3}' <<<"$load_out")
  load_p99=$(awk '/^p99 /{print $3}' <<<"$load_out")
  errs=$(awk -F'[:,]' '/^requests:/{print $4+$6}' <<<"$load_out")
  cpu_req=$(awk -v d="$load_ticks" -v n="$reqs" -v hz="$ticks_per_s" 'BEGIN{printf "%.2f", n ? d*1000/hz/n : 0}')
  echo "$LOAD_CONNECTIONS scrapers for ${LOAD_SECONDS} s: CPU $cpu_req ms/request"
  echo "$load_out" | sed 's/^/  /'
  echo "after load: $(rss)peak VmHWM $peak MiB, cgroup peak $peak_cg MiB, threads $(awk '/^Threads:/{print $2}' "/proc/$pid/status")"
  if [ "${NMT:-0}" = 1 ]; then
    echo "where the memory goes (NMT committed, then smaps_rollup):"
    "$JAVA_HOME/bin/jcmd" "$pid" VM.native_memory summary | grep -E '^Total|^-' | sed 's/^/  /'
    grep -E '^(Rss|Anonymous|Shared_Clean|Private_Dirty):' "/proc/$pid/smaps_rollup" | sed 's/^/  /'
    "$JAVA_HOME/bin/jcmd" "$pid" GC.run >/dev/null
    echo "  live heap after a full GC: $("$JAVA_HOME/bin/jcmd" "$pid" GC.heap_info | grep -oE 'used [0-9]+K' | awk '{s+=$2} END{printf "%.1f MiB", s/1024}')"
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  if [ -n "$busy_pid" ]; then kill "$busy_pid"; wait "$busy_pid" 2>/dev/null || true; busy_pid=""; fi
  rm -rf "$node" "$procfs"
  table+=("$(printf "$row_format" \
    "$label" "$(( bytes / 1000 ))/$(( gz / 1000 ))" "$ready_ms" \
    "$paced_p50/$paced_p99" "$single_p50/$single_p99" "$cpu_ms" "$alloc_kb" "$probe_before/$probe_after" \
    "$steady/$steady_cg" "$load_p50/$load_p99" \
    "$rps" "$errs" "$peak/$peak_cg")")
}

for containers in $ROWS; do
  run_row "$containers"
done

echo
echo "exporter/bench/footprint.sh: one scraper $SINGLE_SCRAPES scrapes at $SINGLE_RATE/s, then back to back (b2b); steady ${STEADY_SECONDS} s of 2 scrapers/15 s; $LOAD_CONNECTIONS scrapers ${LOAD_SECONDS} s"
echo "load average $load_at_start at start, $(cut -d' ' -f1-3 /proc/loadavg) at end; $(nproc) CPUs"
printf "$row_format\n" node "page KB" "ready" "1 scrape ms" "b2b ms" "CPU ms" "alloc KB" "probe ms" "steady MiB" "50 scr. ms" "req/s" "err" "peak MiB"
printf "$row_format\n" "" "raw/gzip" "ms" "p50/p99" "p50/p99" "/scrape" "/scrape" "bef/aft" "RSS/cg" "p50/p99" "" "" "RSS/cg"
printf '%s\n' "${table[@]}"
[ -n "$cg_dir" ] || echo "(cg n/a: no memory cgroup could be made here; run as root for the charge)"
echo "goals (100x8x4): steady RSS <= 128 MiB, peak RSS <= 160 MiB, one scrape p50 <= 15 ms, 50 scrapers p99 <= 60 ms"
