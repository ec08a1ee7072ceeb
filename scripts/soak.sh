#!/usr/bin/env bash
# Load and soak of the real exporter process (bin/vgpu-exporter serve, the launcher's JVM flags) on
# a node of SOAK_CONTAINERS regions written by libvgpu (libvgpu/test/stress/mknode.c): wrk with
# SOAK_CONNECTIONS concurrent scrapers on /metrics for SOAK_SECONDS, one container's region
# replaced every SOAK_INTERVAL (remap churn), RSS and open fds of the exporter sampled every
# SOAK_INTERVAL. Prints wrk's latency distribution, errors, and the least-squares slope of RSS
# (KiB/min) and fds (per min) over the run after the first 20 % (warm-up).
# Fails on any wrk socket error or non-2xx response, on an exporter exit, or when fds grow by more
# than SOAK_MAX_FD_GROWTH over the second half of the run.
#   make soak                                  30 minutes (the issue's soak)
#   SOAK_SECONDS=60 scripts/soak.sh            the issue's 60 s load run (100 scrapers, 200 containers)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
SECONDS_TOTAL=${SOAK_SECONDS:-1800}
CONNS=${SOAK_CONNECTIONS:-100}
CONTAINERS=${SOAK_CONTAINERS:-200}
INTERVAL=${SOAK_INTERVAL:-10}
MAX_FD_GROWTH=${SOAK_MAX_FD_GROWTH:-20}
command -v wrk >/dev/null || { echo "soak: wrk missing (make deps)"; exit 1; }
[ -f exporter/target/exporter.jar ] || { echo "soak: exporter not built (make build)"; exit 1; }
libvgpu/test/stress/run.sh build >/dev/null
work=$(mktemp -d /tmp/vgpu-soak.XXXXXX)
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null
  if [ "${SOAK_KEEP:-}" = 1 ]; then echo "soak: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT
libvgpu/build/stress/mknode "$work/containers" "$CONTAINERS"
port=$(free_port)
bin/vgpu-exporter serve --path.cache-root="$work/containers" --kubernetes=false --nvml=false \
  --node-name=soak --web.listen-address=127.0.0.1 --web.listen-port="$port" --log.level=warn \
  > "$work/exporter.log" 2>&1 &
pid=$!
await_http "http://127.0.0.1:$port/readyz" 30 "$pid" 0.3 || { echo "soak: exporter not ready"; cat "$work/exporter.log"; exit 1; }
series=$(curl -fs "http://127.0.0.1:$port/metrics" | grep -c '^vgpu_container_memory_used_bytes{' || true)
size=$(curl -fs "http://127.0.0.1:$port/metrics" | wc -c)
echo "soak: exporter pid $pid, $CONTAINERS containers ($series per-device used series, $size bytes/scrape), $CONNS connections, ${SECONDS_TOTAL}s"
wrk -t2 -c"$CONNS" -d"${SECONDS_TOTAL}s" --timeout 30s --latency "http://127.0.0.1:$port/metrics" > "$work/wrk.txt" 2>&1 &
wrk_pid=$!
start=$(date +%s)
echo "t_s rss_kib fds" > "$work/samples.txt"
i=0
while kill -0 $wrk_pid 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { echo "soak: exporter exited"; cat "$work/exporter.log"; exit 1; }
  rss=$(awk '/^VmRSS:/{print $2}' /proc/$pid/status)
  fds=$(ls /proc/$pid/fd | wc -l)
  echo "$(( $(date +%s) - start )) $rss $fds" >> "$work/samples.txt"
  c=$(( i % CONTAINERS )); i=$((i + 1))   # replace one region: remap churn
  d=$(ls -d "$work/containers/"*"_c$c" 2>/dev/null | head -1)
  [ -n "$d" ] && rm -rf "$d" && libvgpu/build/stress/mknode "$work/containers" $((c + 1)) "$c"
  sleep "$INTERVAL"
done
wait $wrk_pid || true
cat "$work/wrk.txt"
awk -v warm=0.2 'BEGIN {n=0} NR>1 {t[n]=$1; r[n]=$2; f[n]=$3; n++}
  END {
    s=int(n*warm); m=n-s; if (m<2) {print "soak: too few samples for a slope"; exit}
    for(i=s;i<n;i++){st+=t[i]; sr+=r[i]; sf+=f[i]}
    mt=st/m; mr=sr/m; mf=sf/m
    for(i=s;i<n;i++){vt+=(t[i]-mt)^2; cr+=(t[i]-mt)*(r[i]-mr); cf+=(t[i]-mt)*(f[i]-mf)}
    if (vt==0) vt=1
    printf "soak: %d samples; RSS %d -> %d KiB (max %d), slope %.1f KiB/min; fds %d -> %d, slope %.3f /min\n",
      n, r[0], r[n-1], maxr(r,n), cr/vt*60, f[0], f[n-1], cf/vt*60
  }
  function maxr(a,n,  i,x){x=0; for(i=0;i<n;i++) if(a[i]>x) x=a[i]; return x}' "$work/samples.txt"
errors=$(grep -E 'Socket errors|Non-2xx' "$work/wrk.txt" || true)
# fds half-way (wrk's connections are all open by then) against the last sample
n_samples=$(( $(wc -l < "$work/samples.txt") - 1 ))
fd_first=$(awk -v k=$(( n_samples / 2 + 1 )) 'NR==k{print $3}' "$work/samples.txt")
fd_last=$(tail -1 "$work/samples.txt" | awk '{print $3}')
if [ -n "$errors" ]; then
  echo "soak: FAIL: $errors"
  echo "soak: exporter log (errors, deduplicated):"
  grep -iE 'error|exception|warn' "$work/exporter.log" | sed -E 's/^[^ ]+ //' | sort | uniq -c | sort -rn | head -10
  exit 1
fi
if [ $(( fd_last - fd_first )) -gt "$MAX_FD_GROWTH" ]; then echo "soak: FAIL: fds grew $fd_first -> $fd_last"; exit 1; fi
kill -0 "$pid" 2>/dev/null || { echo "soak: FAIL: exporter exited"; exit 1; }
echo "soak: PASS"
