#!/usr/bin/env bash
# Deploy checks that need no JVM: the alert rules (promtool check + unit tests, one test file per
# alert with a firing and a quiet case) and the Grafana dashboard's type-check against
# @grafana/schema. The Helm chart, rendered manifests and dashboard-vs-Prometheus checks are JUnit
# tests in exporter/src/test/java/io/vgpu/exporter/deploy (they run in `mvn install`).
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

rules=deploy/rules/vgpu-exporter.rules.yaml
if promtool check rules "$rules" >/tmp/test-deploy.$$ 2>&1; then ok; else bad "promtool check rules $rules"; cat /tmp/test-deploy.$$; fi

# Every alert has its own test file, and every test file passes.
for alert in $(grep -oP '^\s*- alert: \K\w+' "$rules"); do
  if grep -lq "alertname: $alert\$" deploy/rules/tests/*.test.yaml; then ok; else bad "no promtool test for alert $alert"; fi
done
for t in deploy/rules/tests/*.test.yaml; do
  if promtool test rules "$t" >/tmp/test-deploy.$$ 2>&1; then ok; else bad "promtool test rules $t"; cat /tmp/test-deploy.$$; fi
done

# The chart's PrometheusRule must read the same file, not a copy.
link=deploy/helm/vgpu-exporter/files/vgpu-exporter.rules.yaml
if [ "$(readlink -f "$link")" = "$(readlink -f "$rules")" ]; then ok; else bad "$link is not a link to $rules"; fi
link=deploy/helm/vgpu-exporter/files/vgpu-exporter.json
if [ "$(readlink -f "$link")" = "$(readlink -f grafana/vgpu-exporter.json)" ]; then ok; else bad "$link is not a link to grafana/vgpu-exporter.json"; fi

# Dashboard: valid JSON, then a TypeScript type-check against @grafana/schema (pinned in
# grafana/.validate/package-lock.json; node_modules is cached there and ignored by git).
if jq -e . grafana/vgpu-exporter.json >/dev/null; then ok; else bad "grafana/vgpu-exporter.json is not JSON"; fi
if (cd grafana/.validate && { [ -x node_modules/.bin/tsc ] && cmp -s package-lock.json node_modules/.package-lock.json.copy \
      || { npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.package-lock.json.copy; }; } \
      && node typecheck.mjs ../vgpu-exporter.json) >/tmp/test-deploy.$$ 2>&1; then
  ok
else
  bad "dashboard type-check against @grafana/schema"; cat /tmp/test-deploy.$$
fi
rm -f /tmp/test-deploy.$$
echo "deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
