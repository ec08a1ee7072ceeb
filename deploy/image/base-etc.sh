# Sourced by build-base.sh and build-base-arm64.sh: the /etc both bases carry. NSS for uid lookups
# (Java reads user.home) with root and nobody only; no other configuration is needed.
# usage: write_base_etc ROOT
write_base_etc() {
  local root=$1
  mkdir -p "$root/etc"
  cat > "$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
PASSWD
  cat > "$root/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$root/etc/nsswitch.conf"
}
