#!/usr/bin/env bash
# scripts/lib.sh — shell helpers shared by the repository's scripts. Source it
# (. "$repo/scripts/lib.sh"), or run `scripts/lib.sh FUNCTION [ARGS...]` for one of them (the
# Makefile finds the JDK that way).
#
#   jdk25               prints the home of a JDK 25 or newer: $JAVA_HOME if it is one, else the
#                       first /usr/lib/jvm/temurin-25*, else Debian/Ubuntu's java-25-openjdk-<arch> or
#                       newer (any architecture); status 1 (nothing printed) when none is
#   need_jdk25          exports JAVA_HOME as jdk25 finds it, or says how to get one and exits 1
#   free_port           prints a TCP port free on 127.0.0.1 now (the kernel's pick)
#   await_http URL SECONDS [PID] [INTERVAL]
#                       polls URL (every INTERVAL seconds, default 0.2) until it answers 2xx;
#                       status 1 when SECONDS pass first or when process PID (the server) exits,
#                       with a line on stderr saying which. curl, else python3.

jdk25() {
  local j
  for j in "${JAVA_HOME:-}" /usr/lib/jvm/temurin-25* /usr/lib/jvm/java-2[5-9]-openjdk-*; do
    [ -n "$j" ] && [ -x "$j/bin/java" ] || continue
    if "$j/bin/java" -version 2>&1 | grep -qE 'version "(2[5-9]|[3-9][0-9])'; then
      echo "$j"
      return 0
    fi
  done
  return 1
}

need_jdk25() {
  local j
  if ! j=$(jdk25); then
    echo "error: JDK 25 not found: set JAVA_HOME to a JDK 25 (e.g. /usr/lib/jvm/temurin-25-jdk-amd64)" >&2
    exit 1
  fi
  export JAVA_HOME=$j
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# http_ok URL: one request; status 0 on a 2xx answer.
http_ok() {
  if command -v curl > /dev/null; then
    curl -fs -o /dev/null --max-time 5 "$1"
  else
    python3 - "$1" << 'PY' > /dev/null 2>&1
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=5).read()
PY
  fi
}

await_http() {
  local url=$1 seconds=$2 pid=${3:-} interval=${4:-0.2} deadline
  deadline=$((SECONDS + seconds))
  until http_ok "$url"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2> /dev/null; then
      echo "await_http: $url: the server (pid $pid) exited" >&2
      return 1
    fi
    if [ "$SECONDS" -gt "$deadline" ]; then # whole seconds: -gt waits the full bound at least
      echo "await_http: $url: no 2xx answer within ${seconds}s" >&2
      return 1
    fi
    sleep "$interval"
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case ${1:-} in
    jdk25 | need_jdk25 | free_port | await_http) "$@" ;;
    *) echo "usage: $0 jdk25|need_jdk25|free_port|await_http ARGS..." >&2; exit 2 ;;
  esac
fi
