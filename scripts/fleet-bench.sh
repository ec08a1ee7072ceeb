#!/usr/bin/env bash
# Fleet benchmark: N simulated GPU nodes (`vgpu-exporter demo`, one JVM each, distinct ports and node
# names, GPUs through the repository's fake libnvidia-ml) scraped by one real Prometheus with
# deploy/rules loaded. For each N it reports series and bytes per node scrape, Prometheus head
# series, memory and rule evaluation time, the demo JVMs' memory, and checks that every query of
# the cluster dashboard (grafana/vgpu-exporter-cluster.json) and its variables return data.
#
#   scripts/fleet-bench.sh                 N = 10 and 50 (NODES="10 50 100" for more), 8 GPUs and
#                                          128 containers per node, 15 s scrapes, measured after 2.5 min
#
# Sizing the machine: N = 50 needs 8 or more cores (2 cores could not start it); each node is ~280
# tasks (128 sleepers, ~150 JVM threads), so N = 100 takes ~28 000 of a default pid_max of 32 768.
#   scripts/fleet-bench.sh --check         the dashboard check only: 3 small nodes, 1 s scrapes (make test)
#
# Environment: NODES, GPUS (8), CONTAINERS (128), IDLE (containers per node holding memory without
# kernels, 8), SCRAPE (15s), MEASURE_AFTER (seconds of scraping before measuring, 150), BASE_PORT
# (19400), TICK (how often each demo's usage moves, 5s: the simulation, not the exporter, is what
# would load a small machine), DEMO_JAVA_OPTS (JVM flags of each demo, default the launcher's). Needs `make build`
# (exporter jar and libvgpu fakes), prometheus and promtool, curl, jq. 127.0.0.1 only. On a copy
# without git history, FLEET_COMMIT names the commit the jars were built from.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
. scripts/lib.sh

check_only=false
if [ "${1:-}" = "--check" ]; then
  check_only=true
  NODES="${NODES:-3}" GPUS="${GPUS:-2}" CONTAINERS="${CONTAINERS:-6}" IDLE="${IDLE:-1}"
  SCRAPE="${SCRAPE:-1s}" MEASURE_AFTER="${MEASURE_AFTER:-0}"
fi
NODES="${NODES:-10 50}"
GPUS="${GPUS:-8}"
CONTAINERS="${CONTAINERS:-128}"
IDLE="${IDLE:-8}"
SCRAPE="${SCRAPE:-15s}"
MEASURE_AFTER="${MEASURE_AFTER:-150}"
BASE_PORT="${BASE_PORT:-19400}"
TICK="${TICK:-5s}"
CHECK_DEADLINE="${CHECK_DEADLINE:-90}"

fake_nvml="$repo/libvgpu/build/fake/libnvidia-ml.so.1"
for need in exporter/target/exporter.jar "$fake_nvml"; do
  [ -e "$need" ] || { echo "fleet-bench: $need missing: run 'make build'" >&2; exit 2; }
done
for tool in prometheus curl jq; do
  command -v "$tool" >/dev/null || { echo "fleet-bench: $tool not installed (make deps)" >&2; exit 2; }
done
dashboard="$repo/grafana/vgpu-exporter-cluster.json"
rules="$repo/deploy/rules/vgpu-exporter.rules.yaml"

work="$(mktemp -d /tmp/vgpu-fleet.XXXXXX)"
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do if kill -0 "$p" 2>/dev/null; then kill "$p"; fi; done
  # The exit status of a process this script killed says nothing: reap it and go on.
  for p in "${pids[@]}"; do if wait "$p" 2>/dev/null; then :; fi; done
  pids=()
}
trap 'stop_all; rm -rf "$work"' EXIT

# Sum of VmRSS and of Pss (KiB; shared pages split among their users) of the given pids.
rss_kib() { awk '/^VmRSS:/ {s += $2} END {print s + 0}' $(printf '/proc/%s/status ' "$@") 2>/dev/null; }
pss_kib() { awk '/^Pss:/ {s += $2} END {print s + 0}' $(printf '/proc/%s/smaps_rollup ' "$@") 2>/dev/null; }
# CPU seconds (user + system, children reaped excluded) the given pids have used so far.
cpu_seconds() {
  local hz
  hz="$(getconf CLK_TCK)"
  cat $(printf '/proc/%s/stat ' "$@") 2>/dev/null | awk -v hz="$hz" '{sub(/.*\) /, ""); s += $12 + $13} END {printf "%.1f", s / hz}'
}
descendants() {
  local p c
  for p in "$@"; do
    for c in $(cat /proc/"$p"/task/*/children 2>/dev/null); do echo "$c"; descendants "$c"; done
  done
}

# promql QUERY -> the JSON result array (fails on a PromQL error).
promql() {
  local body
  body="$(curl -sfG "http://127.0.0.1:$prom_port/api/v1/query" --data-urlencode "query=$1")" || return 1
  [ "$(jq -r .status <<<"$body")" = success ] || { echo "PromQL error: $1: $body" >&2; return 1; }
  jq -c .data.result <<<"$body"
}
scalar() { promql "$1" | jq -r '.[0].value[1] // "NaN"'; }

start_fleet() { # N
  local n="$1" i model
  demo_pids=()
  for ((i = 0; i < n; i++)); do
    # Two GPU models in the fleet: every third node has A100s.
    if ((i % 3 == 2)); then model=NVIDIA_A100-SXM4-40GB; else model=NVIDIA_H100_80GB_HBM3; fi
    mkdir -p "$work/node-$i"
    FAKE_NVML_CONFIG="$work/node-$i/nvml.conf" VGPU_EXPORTER_JAVA_OPTS="${DEMO_JAVA_OPTS:-}" \
      bin/vgpu-exporter demo --port $((BASE_PORT + i)) --node-name "$(printf 'gpu-node-%03d' "$i")" \
      --containers "$CONTAINERS" --gpus "$GPUS" --processes-per-container 1 --idle-containers "$IDLE" \
      --gpu-model "$model" --fake-nvml-config "$work/node-$i/nvml.conf" \
      --nvml=true --nvml.library="$fake_nvml" --attribution.leak-after=60s \
      --tick-interval "$TICK" --log.level=warn --pid-namespaces=false \
      >"$work/node-$i/log" 2>&1 &
    pids+=($!)
    demo_pids+=($!)
    # Staggered: JVM start-up is the expensive part on a small machine.
    ((i % 5 == 4)) && sleep 2
  done
  local deadline=$((SECONDS + 300 + 20 * n))
  for ((i = 0; i < n; i++)); do
    # To a file, not into `grep -q`: grep stops at the first match and curl's failed write would
    # fail the pipeline under pipefail.
    until curl -sf -o "$work/probe" "http://127.0.0.1:$((BASE_PORT + i))/metrics" && grep -q '^vgpu_gpu_memory_total_bytes' "$work/probe"; do
      kill -0 "${demo_pids[$i]}" 2>/dev/null || { echo "demo node $i exited:"; tail -20 "$work/node-$i/log"; return 1; }
      ((SECONDS < deadline)) || { echo "demo node $i not serving GPU metrics in time"; tail -20 "$work/node-$i/log"; return 1; }
      sleep 1
    done
  done
}

start_prometheus() { # N
  local n="$1" i targets=""
  prom_port=$((BASE_PORT - 1))
  for ((i = 0; i < n; i++)); do targets+="'127.0.0.1:$((BASE_PORT + i))',"; done
  cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: $SCRAPE
  evaluation_interval: $SCRAPE
rule_files: ['$rules']
scrape_configs:
  - job_name: vgpu-exporter
    honor_labels: true
    static_configs:
      - targets: [${targets%,}]
  - job_name: prometheus
    static_configs:
      - targets: ['127.0.0.1:$prom_port']
EOF
  rm -rf "$work/tsdb"
  prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
  pids+=($!)
  prom_pid=$!
  await_http "http://127.0.0.1:$prom_port/-/ready" 60 "$prom_pid" 1 \
    || { echo "prometheus not ready"; cat "$work/prometheus.log"; return 1; }
}

# Every panel query and variable of the cluster dashboard returns data; prints what does not.
check_dashboard() {
  local empty=0 q expr where vq sel label
  while IFS=$'\t' read -r where expr; do
    q="${expr//\$namespace/.*}"
    q="${q//\$model/.*}"
    q="${q//\$node/.*}"
    q="${q//\$__rate_interval/1m}"
    q="${q//\$__range/5m}"
    if ! out="$(promql "$q")"; then
      echo "  invalid: $where: $q"; empty=$((empty + 1))
    elif [ "$(jq length <<<"$out")" -eq 0 ]; then
      echo "  no data: $where: $q"; empty=$((empty + 1))
    fi
  done < <(jq -r '.panels[] | select(.targets) | .title as $t | .targets[] | ["panel \"" + $t + "\" " + .refId, .expr] | @tsv' "$dashboard")
  while IFS=$'\t' read -r where vq; do
    [[ "$vq" =~ ^label_values\((.*),[[:space:]]*([a-z_]+)\)$ ]] || { echo "  variable $where: not label_values(): $vq"; empty=$((empty + 1)); continue; }
    sel="${BASH_REMATCH[1]}"
    label="${BASH_REMATCH[2]}"
    if [ "$(curl -sfG "http://127.0.0.1:$prom_port/api/v1/label/$label/values" --data-urlencode "match[]=$sel" | jq '.data | length')" -eq 0 ]; then
      echo "  no data: variable \$$where: $vq"; empty=$((empty + 1))
    fi
  done < <(jq -r '.templating.list[] | select(.type == "query") | [.name, (.query.query // .query)] | @tsv' "$dashboard")
  return "$empty"
}

queries_total() { jq '[.panels[] | select(.targets) | .targets[]] | length' "$dashboard"; }

run_check() {
  echo "fleet check: $NODES demo nodes ($GPUS GPUs x $CONTAINERS containers), Prometheus every $SCRAPE, cluster dashboard queries"
  start_fleet "$NODES"
  start_prometheus "$NODES"
  local deadline=$((SECONDS + CHECK_DEADLINE)) result
  while true; do
    if result="$(check_dashboard)"; then
      echo "fleet check: all $(queries_total) queries and every variable of $(basename "$dashboard") returned data"
      return 0
    fi
    if ((SECONDS >= deadline)); then
      echo "FAIL: cluster dashboard queries without data after ${CHECK_DEADLINE}s of scraping:"
      echo "$result"
      return 1
    fi
    sleep 2
  done
}

run_bench() { # N
  local n="$1" t0 rss_demo pss_demo pss_children nchildren
  echo "== N=$n nodes ($GPUS GPUs x $CONTAINERS containers, $IDLE idle), scrape $SCRAPE; load $(cut -d' ' -f1-3 /proc/loadavg)"
  t0=$SECONDS
  start_fleet "$n"
  echo "   fleet up in $((SECONDS - t0)) s"
  start_prometheus "$n"
  local cpu0 cpu1
  cpu0="$(cpu_seconds "${demo_pids[@]}")"
  sleep "$MEASURE_AFTER"
  cpu1="$(cpu_seconds "${demo_pids[@]}")"
  # The first node's page once it has run as long as Prometheus has scraped it.
  local page="$work/page.txt"
  curl -sf "http://127.0.0.1:$BASE_PORT/metrics" >"$page"
  local series bytes gz containers_dev
  series="$(grep -vc '^#' "$page")"
  bytes="$(wc -c <"$page")"
  gz="$(curl -sf -H 'Accept-Encoding: gzip' "http://127.0.0.1:$BASE_PORT/metrics" | wc -c)"
  containers_dev="$(grep -c '^vgpu_container_memory_used_bytes{' "$page")"
  local result
  if result="$(check_dashboard)"; then dash="all $(queries_total) return data"; else dash="EMPTY: $result"; fi
  rss_demo="$(rss_kib "${demo_pids[@]}")"
  pss_demo="$(pss_kib "${demo_pids[@]}")"
  mapfile -t kids < <(descendants "${demo_pids[@]}")
  nchildren="${#kids[@]}"
  pss_children=0
  if ((nchildren)); then pss_children="$(pss_kib "${kids[@]}")"; fi
  local head rec prom_rss heap eval_p samples sdur prom_cpu missed
  head="$(scalar 'prometheus_tsdb_head_series')"
  rec="$(scalar 'count({__name__=~"[a-z_]+:vgpu_[a-z_]+:[a-z0-9_]+"})')"
  prom_rss="$(scalar 'process_resident_memory_bytes{job="prometheus"}')"
  heap="$(scalar 'go_memstats_heap_inuse_bytes{job="prometheus"}')"
  eval_p="$(promql 'prometheus_rule_group_last_duration_seconds' | jq -r '[.[] | "\(.metric.rule_group | sub(".*;"; "")) \((.value[1] | tonumber) * 1000 | floor / 1)ms"] | join(", ")')"
  samples="$(scalar 'avg(scrape_samples_scraped{job="vgpu-exporter"})')"
  sdur="$(scalar 'avg(scrape_duration_seconds{job="vgpu-exporter"})')"
  # CPU of Prometheus over the last 2 minutes (in cores), and rule evaluations it had to skip
  # because the previous one of the group was still running (a shard too big for its CPU).
  prom_cpu="$(scalar 'rate(process_cpu_seconds_total{job="prometheus"}[2m])')"
  missed="$(scalar 'sum(prometheus_rule_group_iterations_missed_total)')"
  printf '   per node: %s series (%s container x device pairs), scrape %s bytes (%s gzip), Prometheus sees %.0f samples per scrape, scrape took %.3f s on average\n' \
    "$series" "$containers_dev" "$bytes" "$gz" "$samples" "$sdur"
  printf '   Prometheus: head series %s (recording-rule outputs %s), RSS %.0f MiB, Go heap in use %.0f MiB\n' \
    "$head" "$rec" "$(jq -n "$prom_rss / 1048576")" "$(jq -n "$heap / 1048576")"
  printf '   Prometheus CPU: %.3f cores (last 2 min); rule group evaluations missed: %s\n' "$prom_cpu" "$missed"
  printf '   rule groups (last evaluation): %s\n' "$eval_p"
  printf '   demo JVMs: %d, RSS %.0f MiB each (PSS %.0f MiB each, %.0f MiB in all); %d simulated container processes, PSS %.0f MiB in all\n' \
    "$n" "$(jq -n "$rss_demo / 1024 / $n")" "$(jq -n "$pss_demo / 1024 / $n")" "$(jq -n "$pss_demo / 1024")" "$nchildren" "$(jq -n "$pss_children / 1024")"
  printf '   demo JVMs CPU while scraped: %.2f cores in all (%.3f per node)\n' \
    "$(jq -n "($cpu1 - $cpu0) / $MEASURE_AFTER")" "$(jq -n "($cpu1 - $cpu0) / $MEASURE_AFTER / $n")"
  printf '   dashboard: %s\n' "$dash"
  local problems
  # grep -c prints 0 and exits 1 when no line matches; any other failure is an unreadable log.
  if problems="$(cat "$work"/node-*/log | grep -cE 'WARN|ERROR|Exception|Error:')"; then :; elif [ $? -ne 1 ]; then
    echo "fleet-bench: cannot read the demo logs" >&2
    return 1
  fi
  printf '   demo logs: %s lines of warnings or errors\n' "$problems"
  if ((problems)); then cat "$work"/node-*/log | grep -E 'WARN|ERROR|Exception|Error:' | sort | uniq -c | sort -rn | head -5; fi
  printf '   load after: %s, measured after %s s of scraping\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$MEASURE_AFTER"
  stop_all
}

if $check_only; then
  run_check
else
  echo "fleet-bench: commit ${FLEET_COMMIT:-$(git rev-parse --short HEAD)}, $(nproc) CPUs, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  echo "fleet-bench: $(grep -m1 "model name" /proc/cpuinfo | sed "s/.*: //"), java $("$(jdk25 || echo /usr)"/bin/java -version 2>&1 | head -1), $(prometheus --version 2>&1 | head -1)"
  for n in $NODES; do run_bench "$n"; done
fi
