/*
 * log.c — HAMi-compatible log lines: "[HAMI-core <Level>(<pid>:<tid>:<file>:<line>)]: libvgpu: ..."
 * so the grep patterns of the debugging guides keep working and our lines stay recognisable.
 * One write(2) per line: no stdio locks, safe after fork and from any thread.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vgpu.h"

int vgpu_log_level = VGPU_LEVEL_MSG;

static const char *level_name(int level) {
  switch (level) {
    case VGPU_LEVEL_ERROR: return "Error";
    case VGPU_LEVEL_WARN: return "Warn";
    case VGPU_LEVEL_MSG: return "Msg";
    case VGPU_LEVEL_INFO: return "Info";
    default: return "Debug";
  }
}

void vgpu_log(int level, const char *file, int line, const char *fmt, ...) {
  char buf[1024];
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  int n = snprintf(buf, sizeof buf, "[HAMI-core %s(%d:%ld:%s:%d)]: libvgpu: ", level_name(level),
                   (int)getpid(), (long)syscall(SYS_gettid), base, line);
  if (n < 0) return;
  if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t w = write(STDERR_FILENO, buf, len);
  (void)w; /* nothing sensible to do when stderr is gone */
}
