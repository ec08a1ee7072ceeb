#!/usr/bin/env bash
# Fetches what the linux/arm64 image needs and this machine lacks: an aarch64 Java 25 (its jmods,
# which the host's jlink links into an aarch64 runtime) and the aarch64 glibc, libgcc, libstdc++ and
# zlib that runtime loads. They come from Debian 13 (trixie), the first Debian with Java 25, over
# the Debian archive the build machines reach. Nothing is trusted on the way: the archive's
# InRelease is checked with gpgv against the trixie keys of the host's debian-archive-keyring, the
# Packages index against the hash InRelease names, each .deb against the hash the index names.
#   deploy/image/arm64-runtime.sh [OUTDIR]     (default deploy/image/target/arm64)
# Writes OUTDIR/jdk (an aarch64 JDK 25 tree: bin, lib, jmods) and OUTDIR/sysroot (the libraries, with
# /lib -> usr/lib as on a merged-/usr system). Reruns are no-ops while OUTDIR/stamp names the same
# package versions. Env: DEBIAN_MIRROR (default http://deb.debian.org/debian), DEBIAN_SUITE (trixie).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$repo/deploy/image/target/arm64}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
suite="${DEBIAN_SUITE:-trixie}"
jdk_pkgs=(openjdk-25-jre-headless openjdk-25-jdk-headless)
sys_pkgs=(libc6 libgcc-s1 libstdc++6 zlib1g)
die() { echo "arm64-runtime: $*" >&2; exit 1; }
for tool in curl gpgv xz dpkg-deb sha256sum; do
  command -v "$tool" >/dev/null || die "$tool missing (make deps)"
done
keys=()
for k in /usr/share/keyrings/debian-archive-"$suite"-{automatic,stable,security-automatic}.gpg; do
  [ -f "$k" ] && keys+=(--keyring "$k")
done
[ ${#keys[@]} -gt 0 ] || die "no $suite signing keys in /usr/share/keyrings (apt-get install debian-archive-keyring)"

mkdir -p "$out/cache"
cache="$out/cache"
fetch() { # url dest
  curl -fsS --retry 3 --max-time 600 -o "$2.part" "$1" || die "cannot fetch $1"
  mv "$2.part" "$2"
}
fetch "$mirror/dists/$suite/InRelease" "$cache/InRelease"
# As apt decides: at least one good signature by a key of the keyring and no bad one. gpgv also
# exits non-zero when InRelease carries a signature by a key the host's keyring does not have yet
# (the next release's), so its status lines decide, not its exit code.
rm -f "$cache/Release"
if gpgv --status-fd 3 "${keys[@]}" --output "$cache/Release" "$cache/InRelease" \
  3>"$cache/gpgv.status" 2>"$cache/gpgv.log"; then :; fi
grep -q '^\[GNUPG:\] VALIDSIG ' "$cache/gpgv.status" && ! grep -qE '^\[GNUPG:\] (BADSIG|EXPKEYSIG|REVKEYSIG) ' "$cache/gpgv.status" \
  && [ -s "$cache/Release" ] || die "InRelease of $suite does not verify against the $suite keys (see $cache/gpgv.log)"
index=main/binary-arm64/Packages.xz
want="$(awk -v f="$index" '/^SHA256:/ {s = 1; next} /^[^ ]/ {s = 0} s && $3 == f {print $1}' "$cache/Release")"
[ -n "$want" ] || die "Release names no SHA256 for $index"
fetch "$mirror/dists/$suite/$index" "$cache/Packages.xz"
[ "$(sha256sum "$cache/Packages.xz" | cut -d' ' -f1)" = "$want" ] || die "$index does not match its Release hash"
xz -dc "$cache/Packages.xz" >"$cache/Packages"

# One line per package: name version filename sha256 (the newest stanza the index lists).
field_table() {
  awk -v want=" $* " '
    /^Package: / {p = $2} /^Version: / {v = $2} /^Filename: / {f = $2} /^SHA256: / {h = $2}
    /^$/ {if (index(want, " " p " ")) t[p] = p " " v " " f " " h; p = v = f = h = ""}
    END {for (k in t) print t[k]}' "$cache/Packages"
}
mapfile -t rows < <(field_table "${jdk_pkgs[@]}" "${sys_pkgs[@]}" | sort)
[ ${#rows[@]} -eq $((${#jdk_pkgs[@]} + ${#sys_pkgs[@]})) ] \
  || die "the $suite arm64 index lacks some of: ${jdk_pkgs[*]} ${sys_pkgs[*]}"
stamp="$(printf '%s\n' "${rows[@]}" | cut -d' ' -f1,2)"
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ] && [ -x "$out/jdk/bin/java" ]; then
  echo "arm64-runtime: up to date in $out"
  exit 0
fi
rm -rf "$out/jdk" "$out/sysroot" "$out/x"
mkdir -p "$out/x" "$out/sysroot"
for row in "${rows[@]}"; do
  read -r name version file hash <<<"$row"
  deb="$cache/$(basename "$file")"
  [ -f "$deb" ] && [ "$(sha256sum "$deb" | cut -d' ' -f1)" = "$hash" ] || fetch "$mirror/$file" "$deb"
  [ "$(sha256sum "$deb" | cut -d' ' -f1)" = "$hash" ] || die "$name $version does not match its index hash"
  case " ${jdk_pkgs[*]} " in
    *" $name "*) dpkg-deb -x "$deb" "$out/x" ;;
    *) dpkg-deb -x "$deb" "$out/sysroot" ;;
  esac
done
ln -sfn usr/lib "$out/sysroot/lib"
jdk="$(find "$out/x/usr/lib/jvm" -mindepth 1 -maxdepth 1 -type d -name 'java-25-openjdk-arm64')"
[ -n "$jdk" ] && [ -f "$jdk/jmods/java.base.jmod" ] || die "no java-25-openjdk-arm64 with jmods in the packages"
mv "$jdk" "$out/jdk"
rm -rf "$out/x"
echo "$stamp" >"$out/stamp"
echo "arm64-runtime: $(grep '^openjdk-25-jre-headless ' <<<"$stamp") and $(grep '^libc6 ' <<<"$stamp") in $out"
