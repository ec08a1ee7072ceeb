#!/usr/bin/env bash
# check_hooks.sh LIB [LIBCUDA] — the hook list (src/hooks/*.def) is the single source of truth:
#  1. libvgpu.so exports exactly the listed names plus dlsym and dlvsym (fails otherwise);
#  2. with a real driver (default: the libcuda.so.1 the loader finds), lists driver exports that
#     are variants (_vN, _ptsz, _ptds) of a hooked base name but absent from the list — new ABI
#     variants a future driver hands out that would bypass accounting (report only).
# Prototypes need no check here: every hook is defined against cuda.h's declaration, so a .def
# line that disagrees with the header fails to compile.
set -uo pipefail
cd "$(dirname "$0")/.."
LIB=${1:-build/libvgpu.so}
want=$( (echo dlsym; echo dlvsym; grep -hoE '^VGPU_(CUDA|NVML)_HOOK\(([A-Za-z0-9_]+)' src/hooks/*.def | sed -E 's/.*\(//') | sort -u)
have=$(nm -D --defined-only "$LIB" | awk '{print $3}' | sed 's/@.*//' | sort -u)
rc=0
if [ "$want" != "$have" ]; then
  echo "exported symbols differ from the hook lists:"; diff <(echo "$want") <(echo "$have"); rc=1
else
  echo "exports: $(wc -l <<< "$want") names, identical to src/hooks/*.def"
fi
CUDA=${2:-$(ldconfig -p 2>/dev/null | awk '/libcuda.so.1 / {print $NF; exit}')}
if [ -n "$CUDA" ] && [ -e "$CUDA" ]; then
  bases=$(grep -hoE '^VGPU_CUDA_HOOK\([A-Za-z0-9_]+, [A-Za-z0-9_]+' src/hooks/cuda.def | sed -E 's/.*, //' | sort -u)
  nm -D --defined-only "$CUDA" | awk '{print $3}' | sort -u > /tmp/check_hooks.$$
  for b in $bases; do
    grep -E "^${b}(_v[0-9]+)?(_pt[sd]z|_ptds)?$" /tmp/check_hooks.$$ | while read -r s; do
      grep -q "^$s$" <<< "$want" || echo "driver variant not hooked: $s"
    done
  done
  rm -f /tmp/check_hooks.$$
else
  echo "no real libcuda.so.1 here: driver-variant report skipped"
fi
exit $rc
