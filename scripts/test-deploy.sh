#!/usr/bin/env bash
# Deploy checks that need no JVM: the alert and recording rules (promtool check + unit tests, one
# test file per alert with a firing and a quiet case, one test evaluating every recording rule),
# every alert's runbook_url and its section in docs/runbooks.md, the launcher and vgpu-install of
# the image, and the Grafana dashboard's type-check against @grafana/schema. The Helm chart, rendered manifests and dashboard-vs-Prometheus checks are JUnit
# tests in exporter/src/test/java/io/vgpu/exporter/deploy (they run in `mvn install`).
set -uo pipefail
cd "$(dirname "$0")/.."
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }

rules=deploy/rules/vgpu-exporter.rules.yaml
if promtool check rules "$rules" >/tmp/test-deploy.$$ 2>&1; then ok; else bad "promtool check rules $rules"; cat /tmp/test-deploy.$$; fi

# Alert and recording rule names come from the YAML itself (yq), not from a line pattern: a list
# that comes back empty fails, so a rules file written in another layout cannot pass by matching
# nothing.
mapfile -t alerts < <(yq -r '.groups[].rules[] | select(.alert) | .alert' "$rules")
mapfile -t records < <(yq -r '.groups[].rules[] | select(.record) | .record' "$rules")
if [ ${#alerts[@]} -gt 0 ]; then ok; else bad "no alert found in $rules (yq failed or the file has none)"; fi
if [ ${#records[@]} -gt 0 ]; then ok; else bad "no recording rule found in $rules"; fi

# Every alert has its own test file, and every test file passes.
for alert in "${alerts[@]}"; do
  if grep -lq "alertname: $alert\$" deploy/rules/tests/*.test.yaml; then ok; else bad "no promtool test for alert $alert"; fi
done
# Every recording rule is evaluated by a promtool test against hand-worked values.
for record in "${records[@]}"; do
  if grep -qF -- "- expr: $record" deploy/rules/tests/*.test.yaml; then ok; else bad "no promtool test evaluates recording rule $record"; fi
done

# Every alert links its runbook: <chart home>/blob/main/docs/runbooks.md#<alert in lower case>, the
# anchor GitHub gives the heading "## <alert>"; that section says what it means, the doctor command
# and the fix. Links between runbooks must land on a heading too.
runbooks=docs/runbooks.md
home="$(yq -r .home deploy/helm/vgpu-exporter/Chart.yaml)"
if [[ "$home" == https://* ]]; then ok; else bad "Chart.yaml home is not an https URL: $home"; fi
mapfile -t runbook_urls < <(yq -r '.groups[].rules[] | select(.alert) | .annotations.runbook_url // ""' "$rules")
if [ ${#runbook_urls[@]} -eq ${#alerts[@]} ]; then ok; else bad "runbook_url list (${#runbook_urls[@]}) does not line up with the alerts (${#alerts[@]})"; fi
for i in "${!alerts[@]}"; do
  alert="${alerts[$i]}"
  want="$home/blob/main/$runbooks#${alert,,}"
  if [ "${runbook_urls[$i]:-}" = "$want" ]; then ok; else bad "alert $alert: runbook_url '${runbook_urls[$i]:-}', want '$want'"; fi
  section="$(awk -v h="## $alert" '$0 == h {f = 1; next} /^## / {f = 0} f' "$runbooks")"
  if [ -n "$section" ] && grep -q '^\*\*Means\.\*\*' <<<"$section" && grep -q '^\*\*Fix\.\*\*' <<<"$section" \
     && grep -q 'exec "\$POD" -- vgpu-exporter doctor' <<<"$section"; then
    ok
  else
    bad "$runbooks: no section '## $alert' with Means, a kubectl exec ... vgpu-exporter doctor command and Fix"
  fi
done
mapfile -t anchors < <(grep -oP '\]\(#\K[a-z0-9-]+(?=\))' "$runbooks")
if [ ${#anchors[@]} -gt 0 ]; then ok; else bad "$runbooks links no other runbook (the link check would check nothing)"; fi
for a in "${anchors[@]}"; do
  if grep -E '^#+ ' "$runbooks" | sed -E 's/^#+ //' | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-\n' | grep -qx "$a"; then ok; else bad "$runbooks: link #$a has no heading"; fi
done

for t in deploy/rules/tests/*.test.yaml; do
  if promtool test rules "$t" >/tmp/test-deploy.$$ 2>&1; then ok; else bad "promtool test rules $t"; cat /tmp/test-deploy.$$; fi
done

# The chart carries real copies (a chart copied out of the repository keeps them), byte for byte
# the sources: deploy/rules/ and grafana/ (scripts/sync-chart-files.sh refreshes them).
copy=deploy/helm/vgpu-exporter/files/vgpu-exporter.rules.yaml
if [ -f "$copy" ] && [ ! -L "$copy" ] && cmp -s "$copy" "$rules"; then ok; else bad "$copy is not a plain copy of $rules (run scripts/sync-chart-files.sh)"; fi
for dash in vgpu-exporter.json vgpu-exporter-cluster.json vgpu-usage-cost.json; do
  copy=deploy/helm/vgpu-exporter/files/$dash
  if [ -f "$copy" ] && [ ! -L "$copy" ] && cmp -s "$copy" "grafana/$dash"; then ok; else bad "$copy is not a plain copy of grafana/$dash (run scripts/sync-chart-files.sh)"; fi
done
if [ -z "$(find deploy/helm -type l)" ]; then ok; else bad "links in the chart (a copied chart loses them): $(find deploy/helm -type l)"; fi

# Dashboard: valid JSON, then a TypeScript type-check against @grafana/schema (pinned in
# grafana/.validate/package-lock.json; node_modules is cached there and ignored by git).
# The same for the cluster dashboard (its queries are run against Prometheus by scripts/fleet-bench.sh --check).
# And the usage and cost dashboard (docs/usage-accounting.md; DashboardQueryTest runs its queries).
for dash in vgpu-exporter.json vgpu-exporter-cluster.json vgpu-usage-cost.json; do
  if jq -e . "grafana/$dash" >/dev/null; then ok; else bad "grafana/$dash is not JSON"; fi
  if (cd grafana/.validate && { [ -x node_modules/.bin/tsc ] && cmp -s package-lock.json node_modules/.package-lock.json.copy \
        || { npm ci --no-audit --no-fund --loglevel=error && cp package-lock.json node_modules/.package-lock.json.copy; }; } \
        && node typecheck.mjs "../$dash") >/tmp/test-deploy.$$ 2>&1; then
    ok
  else
    bad "dashboard $dash type-check against @grafana/schema"; cat /tmp/test-deploy.$$
  fi
done
# The image's vgpu-exporter launcher (the image has no shell): built against a stand-in java, it
# must pass VGPU_EXPORTER_JAVA_OPTS (split at blanks; the compiled-in footprint flags when unset) as
# JVM options before "-jar JAR" and every argument through verbatim after it, set no
# JDK_JAVA_OPTIONS (java would print "Picked up JDK_JAVA_OPTIONS" before every kubectl exec'd
# command), return the program's exit code, and fail with 127 and a message when the runtime is
# missing.
t="$(mktemp -d)"
printf '#!/bin/sh\nprintf "%%s\\n" "$0" "$@" "jdk_opts=${JDK_JAVA_OPTIONS-unset}"\nexit 7\n' >"$t/java"; chmod 755 "$t/java"
if gcc -O2 -Wall -Wextra -Werror -DJAVA_BIN="\"$t/java\"" -DEXPORTER_JAR='"/opt/x/exporter.jar"' \
     -o "$t/vgpu-exporter" deploy/image/vgpu-exporter-launcher.c \
   && gcc -O2 -Wall -Wextra -Werror -DJAVA_BIN='"/nonexistent/java"' -o "$t/no-java" deploy/image/vgpu-exporter-launcher.c; then
  ok
  env -u JDK_JAVA_OPTIONS VGPU_EXPORTER_JAVA_OPTS=" -Xmx1m  -Dk=v " "$t/vgpu-exporter" doctor "two words" "" --uid='$(id)' >"$t/out" 2>&1; rc=$?
  printf '%s\n' "$t/java" -Xmx1m -Dk=v -jar /opt/x/exporter.jar doctor "two words" "" '--uid=$(id)' "jdk_opts=unset" >"$t/want"
  [ "$rc" -eq 7 ] && cmp -s "$t/out" "$t/want" && ok || { bad "launcher: exit $rc (want 7) or argv/env differ:"; diff "$t/want" "$t/out"; }
  env -u JDK_JAVA_OPTIONS -u VGPU_EXPORTER_JAVA_OPTS "$t/vgpu-exporter" version >"$t/out" 2>&1; rc=$?
  [ "$rc" -eq 7 ] && grep -qx -- '-Xmx48m' "$t/out" && grep -qx -- '-Djna.tmpdir=/tmp' "$t/out" \
    && [ "$(grep -n -- '^-jar$' "$t/out" | cut -d: -f1)" -gt 10 ] && ok \
    || bad "launcher without VGPU_EXPORTER_JAVA_OPTS: exit $rc, not the footprint flags: $(cat "$t/out")"
  "$t/no-java" version >"$t/out" 2>&1; rc=$?
  [ "$rc" -eq 127 ] && grep -q 'cannot run /nonexistent/java' "$t/out" && ok || bad "launcher without a runtime: exit $rc, $(cat "$t/out")"
else
  bad "vgpu-exporter-launcher.c does not compile"
fi
rm -rf "$t"

# vgpu-install (the installer DaemonSet's process): atomic replacement and refusals, on the binary
# the image ships (make image-progs).
t="$(mktemp -d)"
if make -s image-progs && cp deploy/image/target/bin/vgpu-install "$t/vgpu-install"; then
  ok
  mkdir -p "$t/src" "$t/host"
  head -c 1048576 /dev/urandom >"$t/src/libvgpu.so"
  printf '#!/bin/sh\necho tool\n' >"$t/src/shrreg-tool"; chmod 755 "$t/src/shrreg-tool"
  "$t/vgpu-install" --to="$t/host" --preload "$t/src/libvgpu.so" "$t/src/libvgpu.so:libvgpu.so.v2.7.0" "$t/src/shrreg-tool" >/dev/null \
    && cmp -s "$t/src/libvgpu.so" "$t/host/libvgpu.so" && cmp -s "$t/src/libvgpu.so" "$t/host/libvgpu.so.v2.7.0" \
    && [ -x "$t/host/shrreg-tool" ] && [ "$(cat "$t/host/ld.so.preload")" = "$t/host/libvgpu.so" ] \
    && ok || bad "vgpu-install: first install"
  # A process holding the old library keeps its bytes; the path gets the complete new file.
  cp "$t/host/libvgpu.so" "$t/old"
  exec 3<"$t/host/libvgpu.so"
  old_inode="$(stat -c %i "$t/host/libvgpu.so")"
  head -c 2097152 /dev/urandom >"$t/src/libvgpu.so"
  "$t/vgpu-install" --to="$t/host" "$t/src/libvgpu.so" >/dev/null \
    && cmp -s /dev/fd/3 "$t/old" && cmp -s "$t/src/libvgpu.so" "$t/host/libvgpu.so" \
    && [ "$(stat -c %i "$t/host/libvgpu.so")" != "$old_inode" ] \
    && ok || bad "vgpu-install: replacement is not atomic (open copy changed or new file incomplete)"
  exec 3<&-
  [ -z "$(find "$t/host" -name '.*vgpu-install*')" ] && ok || bad "vgpu-install: temporary files left behind"
  "$t/vgpu-install" --to=relative/dir "$t/src/libvgpu.so" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "vgpu-install: relative --to accepted"
  "$t/vgpu-install" --to="$t/host" "$t/src/libvgpu.so:.." >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "vgpu-install: target name .. accepted"
  "$t/vgpu-install" --to="$t/host" --preload "$t/src/shrreg-tool" >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "vgpu-install: --preload without libvgpu.so accepted"
  "$t/vgpu-install" --to="$t/host" "$t/src/missing.so" >/dev/null 2>&1; [ $? -eq 1 ] && ok || bad "vgpu-install: missing file not an I/O error"
  [ "$(ls -A "$t" | tr '\n' ' ')" = "host old src vgpu-install " ] && ok || bad "vgpu-install: wrote outside --to: $(ls -A "$t")"
else
  bad "vgpu-install does not build (make image-progs)"
fi
rm -rf "$t"

rm -f /tmp/test-deploy.$$
echo "deploy: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
