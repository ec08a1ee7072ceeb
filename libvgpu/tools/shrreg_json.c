/*
 * shrreg-tool's JSON writer: enough for flat objects and arrays, with string escaping. Every
 * string it writes is escaped here; tenant-written region text is cleaned (copy_clean) before.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#include "shrreg_tool.h"

static void jw_raw_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void jw_pre(jw_t *w, const char *key) {
  if (!w->first[w->depth]) fputc(',', w->f);
  w->first[w->depth] = 0;
  if (key != NULL) {
    jw_raw_str(w->f, key);
    fputc(':', w->f);
  }
}
void jw_open(jw_t *w, const char *key, char c) {
  jw_pre(w, key);
  fputc(c, w->f);
  w->first[++w->depth] = 1;
}
void jw_close(jw_t *w, char c) {
  w->depth--;
  fputc(c, w->f);
  if (w->depth == 0) fputc('\n', w->f);
}
void jw_i64(jw_t *w, const char *k, int64_t v) { jw_pre(w, k); fprintf(w->f, "%" PRId64, v); }
void jw_u64(jw_t *w, const char *k, uint64_t v) { jw_pre(w, k); fprintf(w->f, "%" PRIu64, v); }
void jw_str(jw_t *w, const char *k, const char *v) { jw_pre(w, k); if (v) jw_raw_str(w->f, v); else fputs("null", w->f); }
void jw_bool(jw_t *w, const char *k, int v) { jw_pre(w, k); fputs(v ? "true" : "false", w->f); }
void jw_null(jw_t *w, const char *k) { jw_pre(w, k); fputs("null", w->f); }
