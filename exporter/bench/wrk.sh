#!/usr/bin/env bash
# Load test: 50 concurrent scrapers against a running exporter, latency percentiles and errors.
#   exporter/bench/wrk.sh [URL] [DURATION]     (defaults: http://127.0.0.1:9394/metrics, 60s)
# Start the exporter first, e.g. `bin/vgpu-exporter demo` or serve against a generated node.
set -euo pipefail
url="${1:-http://127.0.0.1:9394/metrics}"
duration="${2:-60s}"
command -v wrk >/dev/null || { echo "error: wrk not installed (apt-get install wrk)" >&2; exit 1; }
script="$(mktemp --suffix=.lua)"
trap 'rm -f "$script"' EXIT
# Count non-2xx answers as errors in the summary.
cat >"$script" <<'LUA'
local errors = 0
response = function(status, headers, body)
  if status ~= 200 then errors = errors + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("non-200 responses: %d\n", summary.errors.status))
  for _, p in ipairs({50, 90, 99, 99.9}) do
    io.write(string.format("p%g latency: %.1f ms\n", p, latency:percentile(p) / 1000))
  end
end
LUA
exec wrk -t2 -c50 -d"$duration" --timeout 10s --latency -s "$script" "$url"
