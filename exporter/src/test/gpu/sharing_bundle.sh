#!/usr/bin/env bash
# sharing_bundle.sh — packs what sharing_proof.sh needs on the GPU machine (which has no Java and
# receives at most 64 MiB) into DEST/bundle.txz, with DEST/run.sh to run it there, then checks the
# bundle here: its own Java, jars, ProofServe.class and libvgpu.so run sharing_dry_run.sh.
#   JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 exporter/src/test/gpu/sharing_bundle.sh DEST
# Needs the exporter built (./mvnw -pl exporter -am install -DskipTests) and root (the dry run).
# The bundle: a jlink'ed Java 25 (the modules the exporter uses), exporter.jar and its libraries
# less those only a cluster needs (the kubelet's gRPC stack and the Kubernetes models beyond
# core: the proof runs --kubernetes=false and no pod-resources socket; the dry run proves the
# rest loads without them), ProofServe.class, libvgpu.so (make -C libvgpu lib), the proof's
# sources. On the GPU machine, from the repository root: bash DEST/run.sh (writes under $OUT).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
dest="${1:?usage: sharing_bundle.sh DEST}"
. "$repo/scripts/lib.sh"
need_jdk25
stage="$(mktemp -d /tmp/vgpu-sharing-bundle.XXXXXX)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$dest" "$stage/repo/exporter/target/lib" "$stage/repo/exporter/src/test/gpu" \
  "$stage/repo/scripts" "$stage/repo/proof"

"$JAVA_HOME/bin/jlink" --add-modules \
  java.base,java.logging,java.management,java.naming,java.net.http,java.xml,jdk.management,jdk.unsupported,jdk.crypto.ec \
  --compress zip-9 --strip-debug --no-header-files --no-man-pages --output "$stage/jre"
target="$repo/exporter/target"
cp "$target/exporter.jar" "$stage/repo/exporter/target/"
for j in "$target"/lib/*.jar; do
  case "$(basename "$j")" in
    grpc-* | proto-google-common-protos-* | guava-* | failureaccess-* | perfmark-* | error_prone_annotations-* | j2objc-*) ;;
    kubernetes-model-core-* | kubernetes-model-common-*) cp "$j" "$stage/repo/exporter/target/lib/" ;;
    kubernetes-model-*) ;;
    *) cp "$j" "$stage/repo/exporter/target/lib/" ;;
  esac
done
"$JAVA_HOME/bin/javac" -d "$stage/repo/proof" -cp "$target/exporter.jar:$target/lib/*" "$here/ProofServe.java"
make -s -C "$repo/libvgpu" lib
cp "$repo/libvgpu/build/libvgpu.so" "$stage/repo/"
cp "$repo/scripts/lib.sh" "$stage/repo/scripts/"
cp "$here"/{Makefile,nvml_probe.c,duty.c,sharing_proof.sh,sharing_dry_run.sh,analyze.py,analyze_sharing.py,ProofServe.java} \
  "$stage/repo/exporter/src/test/gpu/"
tar cJf "$dest/bundle.txz" -C "$stage" jre repo
cat >"$dest/run.sh" <<'RUN'
#!/usr/bin/env bash
# One device call: issue 28's GPU proof (helper h28d, exporter/src/test/gpu/sharing_proof.sh): a
# whole-GPU pod (own PID namespace and kubepods cgroup, no preload) and a vGPU pod (libvgpu) on one
# GPU; the exporter's per-container SM means vs an independent NVML reader over 60 s, memory exact.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/card.txt" 2>&1
rm -rf /tmp/h28d && mkdir -p /tmp/h28d && tar xJf "$here/bundle.txz" -C /tmp/h28d
(cd /tmp/h28d/repo && JAVA_HOME=/tmp/h28d/jre PROOF_CLASSES=/tmp/h28d/repo/proof \
  LIBVGPU_SO=/tmp/h28d/repo/libvgpu.so OUT="$OUT/sharing" MEASURE="${MEASURE:-60}" WINDOW="${WINDOW:-10}" \
  timeout 420 exporter/src/test/gpu/sharing_proof.sh) >"$OUT/sharing.txt" 2>&1
echo "sharing rc $?"
cat "$OUT/card.txt"
tail -40 "$OUT/sharing.txt"
RUN
chmod +x "$dest/run.sh"
echo "bundle: $(du -h "$dest/bundle.txz" | cut -f1) in $dest (run.sh beside it)"

# The bundle as the GPU machine gets it, on the fake driver here.
check="$(mktemp -d /tmp/vgpu-sharing-check.XXXXXX)"
tar xJf "$dest/bundle.txz" -C "$check"
JAVA_HOME="$check/jre" VGPU_EXPORTER_JAR="$check/repo/exporter/target/exporter.jar" \
  PROOF_CLASSES="$check/repo/proof" LIBVGPU_SO="$check/repo/libvgpu.so" \
  "$here/sharing_dry_run.sh"
rm -rf "$check"
