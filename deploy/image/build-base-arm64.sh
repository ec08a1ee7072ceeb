#!/usr/bin/env bash
# The linux/arm64 image's base (build-base.sh with ARCH=arm64 comes here): a FROM-scratch root
# holding the aarch64 glibc pieces the staged context's ELF objects need, resolved from their
# NEEDED entries in the sysroot arm64-runtime.sh fetched (Debian 13's glibc: its Java 25 needs
# glibc 2.38), the same /etc files as the x86 base, and /lib -> usr/lib (the aarch64 loader's path
# is /lib/ld-linux-aarch64.so.1). Imported with --platform linux/arm64.
#   ARCH=arm64 deploy/image/build-base.sh DOCKER_CMD...
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/base-etc.sh"
ctx="$here/target/context-arm64"
sysroot="$here/target/arm64/sysroot"
root="$here/target/base-rootfs-arm64"
tag="${BASE_TAG:-vgpu-base:local-arm64}"
[ -d "$ctx/jre" ] || { echo "build-base-arm64: stage the context first (ARCH=arm64 deploy/image/build.sh)" >&2; exit 1; }
[ -f "$sysroot/usr/lib/aarch64-linux-gnu/libc.so.6" ] || { echo "build-base-arm64: no sysroot (deploy/image/arm64-runtime.sh)" >&2; exit 1; }
rm -rf "$root"
mkdir -p "$root"/{etc,tmp,usr/lib/aarch64-linux-gnu}
ln -s usr/lib "$root/lib"
chmod 1777 "$root/tmp"

needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
# Every aarch64 ELF object staged (the runtime's own libraries are found through its RPATH, so a
# name that exists in the context is not copied), plus what JNA's stub and libvgpu.so load by
# name at run time (libdl, libpthread, librt: stubs since glibc 2.34, still linked by older code).
mapfile -t elves < <(find "$ctx" -type f \( -name '*.so*' -o -perm -u+x \) -exec file -N {} + \
  | grep -E ': +ELF 64-bit .*(executable|shared object).*ARM aarch64' | sed 's/: .*//' \
  | grep -vE '/lib(awt_xawt|splashscreen|jsound)\.so$')
[ ${#elves[@]} -gt 0 ] || { echo "build-base-arm64: no aarch64 ELF objects in $ctx" >&2; exit 1; }
declare -A inctx=() done_=()
for f in "${elves[@]}"; do inctx[$(basename "$f")]=1; done
queue=(ld-linux-aarch64.so.1 libdl.so.2 libpthread.so.0 librt.so.1)
for f in "${elves[@]}"; do mapfile -t -O ${#queue[@]} queue < <(needed "$f"); done
while [ ${#queue[@]} -gt 0 ]; do
  name="${queue[0]}"
  queue=("${queue[@]:1}")
  [ -n "${done_[$name]:-}" ] || [ -n "${inctx[$name]:-}" ] && continue
  done_[$name]=1
  src="$sysroot/usr/lib/aarch64-linux-gnu/$name"
  [ -e "$src" ] || { echo "build-base-arm64: $name (needed by the staged context) is not in $sysroot" >&2; exit 1; }
  cp -L "$src" "$root/usr/lib/aarch64-linux-gnu/$name"
  mapfile -t -O ${#queue[@]} queue < <(needed "$src")
done
ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$root/usr/lib/ld-linux-aarch64.so.1"
write_base_etc "$root"
tar -C "$root" --sort=name --owner=0 --group=0 --numeric-owner -cf "$here/target/base-rootfs-arm64.tar" .
# `docker import --platform` records the daemon's architecture on docker 20.10, so the base is
# loaded as a one-layer image in `docker save`'s format whose config says linux/arm64.
glibc="$(sed -n 's/^libc6 //p' "$here/target/arm64/stamp")"
python3 - "$here/target" "$tag" "$glibc" <<'PY'
import hashlib, json, os, sys, tarfile
target, tag, glibc = sys.argv[1:4]
layer = os.path.join(target, "base-rootfs-arm64.tar")
digest = hashlib.sha256(open(layer, "rb").read()).hexdigest()
config = {"architecture": "arm64", "os": "linux", "config": {},
          "rootfs": {"type": "layers", "diff_ids": ["sha256:" + digest]},
          "history": [{"created_by": "deploy/image/build-base-arm64.sh: glibc " + glibc + " from Debian"}]}
blob = json.dumps(config, sort_keys=True).encode()
cid = hashlib.sha256(blob).hexdigest()
manifest = json.dumps([{"Config": cid + ".json", "RepoTags": [tag], "Layers": [digest + "/layer.tar"]}]).encode()
with tarfile.open(os.path.join(target, "base-image-arm64.tar"), "w") as out:
    def add(name, data):
        info = tarfile.TarInfo(name); info.size = len(data)
        import io; out.addfile(info, io.BytesIO(data))
    add(cid + ".json", blob)
    add("manifest.json", manifest)
    out.add(layer, digest + "/layer.tar")
PY
"$@" load -i "$here/target/base-image-arm64.tar" >/dev/null
[ "$("$@" image inspect -f '{{.Os}}/{{.Architecture}}' "$tag")" = linux/arm64 ] \
  || { echo "build-base-arm64: $tag did not load as linux/arm64" >&2; exit 1; }
echo "build-base-arm64: $tag ($(du -sh "$root" | cut -f1), ${#done_[@]} libraries, glibc $glibc)"
