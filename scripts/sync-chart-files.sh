#!/usr/bin/env bash
# The Helm chart carries copies of the alert rules and dashboards in deploy/helm/vgpu-exporter/files/
# (real files, not links: a chart copied out of the repository, packaged or pushed to a registry
# keeps them). The sources stay deploy/rules/ and grafana/; run this after editing them.
# scripts/test-deploy.sh fails while a copy differs from its source.
set -euo pipefail
cd "$(dirname "$0")/.."
files=deploy/helm/vgpu-exporter/files
for pair in "deploy/rules/vgpu-exporter.rules.yaml:vgpu-exporter.rules.yaml" \
  "grafana/vgpu-exporter.json:vgpu-exporter.json" \
  "grafana/vgpu-exporter-cluster.json:vgpu-exporter-cluster.json" \
  "grafana/vgpu-usage-cost.json:vgpu-usage-cost.json"; do
  src="${pair%%:*}"
  dst="$files/${pair#*:}"
  if [ -L "$dst" ] || ! cmp -s "$src" "$dst"; then
    rm -f "$dst"
    cp "$src" "$dst"
    echo "sync-chart-files: $dst <- $src"
  fi
done
