/*
 * shrreg-tool's read-only commands: --inspect (text and JSON) and --version.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shrreg_tool.h"

/* ---------------------------------------------------------------------------------------------- */
/* --inspect */

static const char *status_name(int status) {
  switch (status) {
    case VGPU_SLOT_RUNNING: return "ACTIVE";
    case VGPU_SLOT_SUSPENDED: return "SUSPENDED";
    case VGPU_SLOT_FREE: return "EXITED";
  }
  return "UNKNOWN";
}

static void fmt_mb(char *buf, size_t cap, uint64_t bytes) {
  snprintf(buf, cap, "%" PRIu64 " MB", bytes >> 20);
}

static void print_ext_json(jw_t *w, const region_t *r) {
  char tmp[VGPU_CONTAINER_NAME_LEN + 1];
  int d;
  if (r->v.map.ext == NULL) {
    jw_null(w, "extension");
    return;
  }
  jw_open(w, "extension", '{');
  jw_i64(w, "major", r->v.map.ext->major);
  jw_i64(w, "minor", r->v.map.ext->minor);
  jw_u64(w, "generation", __atomic_load_n(&r->v.map.ext->generation, __ATOMIC_ACQUIRE));
  jw_u64(w, "created_ns", r->v.map.ext->created_ns);
  copy_clean(tmp, sizeof tmp, r->v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
  jw_str(w, "lib_version", tmp);
  copy_clean(tmp, sizeof tmp, r->v.map.ext->pod_uid, VGPU_POD_UID_LEN);
  jw_str(w, "pod_uid", tmp);
  copy_clean(tmp, sizeof tmp, r->v.map.ext->container_name, VGPU_CONTAINER_NAME_LEN);
  jw_str(w, "container_name", tmp);
  jw_open(w, "devices", '[');
  for (d = 0; r->v.ext_has_devices && d < VGPU_MAX_DEVICES; d++) {
    const vgpu_ext_device_t *e = &r->v.map.ext->devices[d];
    if (e->launches_total == 0 && e->oom_rejections == 0 && e->throttled_ns == 0 && e->busy_ns == 0) continue;
    jw_open(w, NULL, '{');
    jw_i64(w, "index", d);
    jw_u64(w, "oom_rejections", e->oom_rejections);
    jw_u64(w, "oom_rejected_bytes", e->oom_rejected_bytes);
    jw_u64(w, "throttled_ns", e->throttled_ns);
    jw_u64(w, "launches_delayed", e->launches_delayed);
    jw_u64(w, "launches_total", e->launches_total);
    jw_u64(w, "busy_ns", e->busy_ns);
    jw_u64(w, "limiter_window_ppm", e->limiter_window_ppm);
    jw_close(w, '}');
  }
  jw_close(w, ']');
  jw_close(w, '}');
}

static void print_lock_json(jw_t *w, const lock_view_t *lk) {
  jw_open(w, "lock", '{');
  jw_str(w, "state", lock_state_key(lk->state));
  if (lk->has_sem) jw_i64(w, "semaphore_value", lk->sem_value);
  else jw_null(w, "semaphore_value");
  jw_bool(w, "semaphore_valid", lk->sem_valid);
  if (!lk->sem_valid) jw_str(w, "semaphore_problem", lk->sem_invalid_why);
  if (lk->holder_pid != 0) {
    jw_i64(w, "holder_pid", lk->holder_pid);
    jw_str(w, "holder_source", lk->holder_source);
    jw_str(w, "holder_liveness", vgpu_liveness_name(lk->holder_live));
  } else {
    jw_null(w, "holder_pid");
  }
  if (lk->held_ns != 0) jw_u64(w, "held_ms", lk->held_ns / 1000000);
  if (lk->record_lock_pid != 0) jw_i64(w, "record_lock_pid", lk->record_lock_pid);
  jw_close(w, '}');
}

static void print_inspect_json(const region_t *r, const snapshot_t *s, const options_t *o) {
  jw_t w = {stdout, 0, {1}};
  int d;
  int i;
  jw_open(&w, NULL, '{');
  jw_str(&w, "file", r->path);
  jw_u64(&w, "file_size", r->v.size);
  jw_str(&w, "layout", r->v.lay->label);
  if (s->h.major >= 0) {
    jw_open(&w, "version", '{');
    jw_i64(&w, "major", s->h.major);
    jw_i64(&w, "minor", s->h.minor);
    jw_close(&w, '}');
  } else {
    jw_null(&w, "version");
  }
  jw_u64(&w, "owner_pid", s->h.owner_pid);
  jw_i64(&w, "device_num", s->raw_device_num);
  jw_i64(&w, "proc_num", s->h.proc_num);
  jw_i64(&w, "utilization_switch", s->h.utilization_switch);
  jw_i64(&w, "recent_kernel", s->h.recent_kernel);
  jw_i64(&w, "priority", s->h.priority);
  if (s->h.has_last_kernel) jw_u64(&w, "last_kernel_time", s->h.last_kernel_time);
  else jw_null(&w, "last_kernel_time");
  jw_str(&w, "liveness_from", o->host_pids ? "hostpid" : "pid");
  print_lock_json(&w, &s->lock);
  jw_open(&w, "devices", '[');
  for (d = 0; d < s->device_count; d++) {
    const dev_view_t *dv = &s->dev[d];
    if (o->device >= 0 && o->device != d) continue;
    jw_open(&w, NULL, '{');
    jw_i64(&w, "index", d);
    jw_str(&w, "uuid", dv->uuid);
    jw_u64(&w, "memory_limit_bytes", dv->limit);
    jw_u64(&w, "sm_limit_percent", dv->sm_limit);
    jw_u64(&w, "used_bytes", dv->used);
    jw_u64(&w, "dead_process_bytes", dv->dead_used);
    jw_i64(&w, "tasks", dv->tasks);
    jw_close(&w, '}');
  }
  jw_close(&w, ']');
  jw_open(&w, "processes", '[');
  for (i = 0; i < s->nslots; i++) {
    const slot_view_t *sl = &s->slots[i];
    if (o->device >= 0 && !device_in_use(sl, o->device) && s->device_count > 1) continue;
    jw_open(&w, NULL, '{');
    jw_i64(&w, "slot", sl->slot);
    jw_i64(&w, "pid", sl->pid);
    jw_i64(&w, "hostpid", sl->hostpid);
    jw_i64(&w, "status", sl->status);
    jw_str(&w, "status_name", status_name(sl->status));
    jw_str(&w, "liveness", vgpu_liveness_name(sl->live));
    jw_bool(&w, "torn", sl->torn);
    if (sl->has_ext) {
      jw_u64(&w, "start_time_ticks", sl->start_ticks);
      jw_u64(&w, "heartbeat_ns", sl->heartbeat_ns);
      jw_i64(&w, "hostpid_source", sl->hostpid_source);
    }
    jw_open(&w, "devices", '[');
    for (d = 0; d < s->device_count; d++) {
      const dev_usage_t *u = &sl->dev[d];
      if (o->device >= 0 && o->device != d) continue;
      jw_open(&w, NULL, '{');
      jw_i64(&w, "index", d);
      jw_u64(&w, "used_bytes", u->total);
      jw_u64(&w, "context_bytes", u->context);
      jw_u64(&w, "module_bytes", u->module);
      jw_u64(&w, "data_bytes", u->data);
      jw_u64(&w, "monitor_used_bytes", u->monitor);
      jw_u64(&w, "sm_util", u->sm_util);
      jw_close(&w, '}');
    }
    jw_close(&w, ']');
    jw_close(&w, '}');
  }
  jw_close(&w, ']');
  print_ext_json(&w, r);
  jw_close(&w, '}');
}

static void print_task_line(const slot_view_t *sl, int d, uint64_t sm_limit) {
  char mem[32];
  fmt_mb(mem, sizeof mem, sl->dev[d].total);
  printf("    PID: %d  Host PID: %d  Memory: %s  Util: %" PRIu64 "%%  Util Limit: %" PRIu64 "%%  Status: %s  Alive: %s%s\n",
         sl->pid, sl->hostpid, mem, sl->dev[d].sm_util, sm_limit == 0 ? 100 : sm_limit, status_name(sl->status),
         vgpu_liveness_name(sl->live), sl->torn ? "  (torn read)" : "");
}

static void print_inspect_text(const region_t *r, const snapshot_t *s, const options_t *o) {
  char tmp[VGPU_CONTAINER_NAME_LEN + 1];
  char mem[32];
  int d;
  int i;
  int idle = 0;
  const lock_view_t *lk = &s->lock;
  printf("=== Shared Region Info ===\n");
  printf("File:            %s\n", r->path);
  printf("Layout:          %s (%zu bytes)\n", r->v.lay->label, r->v.size);
  if (s->h.major >= 0) printf("Version:         MAJOR=%d, MINOR=%d\n", s->h.major, s->h.minor);
  else printf("Version:         none (pre-1.1 layout)\n");
  if (r->v.map.ext != NULL) {
    copy_clean(tmp, sizeof tmp, r->v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
    printf("Library:         %s (extension %u.%u)\n", tmp[0] ? tmp : "libvgpu", r->v.map.ext->major, r->v.map.ext->minor);
    copy_clean(tmp, sizeof tmp, r->v.map.ext->pod_uid, VGPU_POD_UID_LEN);
    printf("Pod UID:         %s\n", tmp[0] ? tmp : "-");
    copy_clean(tmp, sizeof tmp, r->v.map.ext->container_name, VGPU_CONTAINER_NAME_LEN);
    printf("Container:       %s\n", tmp[0] ? tmp : "-");
  } else {
    printf("Library:         HAMi-core or older libvgpu (no extension block)\n");
  }
  printf("Processes:       %d (%d running, %d suspended, %d gone)%s\n", s->nslots, s->running, s->suspended, s->dead,
         s->torn ? "  [some slots changed while read]" : "");
  printf("Lock Status:     %s\n", lock_state_name(lk->state));
  if (!lk->sem_valid) printf("Lock Semaphore:  CORRUPT (%s): --cleanup and --force-unlock refuse it\n", lk->sem_invalid_why);
  if (lk->holder_pid != 0) {
    printf("Lock Holder State: %s (from %s)", vgpu_liveness_name(lk->holder_live), lk->holder_source);
    if (lk->held_ns != 0) printf(", held %.1f s", (double)lk->held_ns / 1e9);
    printf("\n");
    printf("Lock Holder:     %d\n", lk->holder_pid);
  } else {
    printf("Lock Holder:     none\n");
  }
  if (lk->record_lock_pid != 0) printf("Record Lock:     held by %d (kernel-managed, released if it dies)\n", lk->record_lock_pid);
  printf("Util Switch:     %d   Recent Kernel: %d   Priority: %d\n", s->h.utilization_switch, s->h.recent_kernel, s->h.priority);
  if (s->h.has_last_kernel && s->h.last_kernel_time != 0) {
    time_t t = (time_t)s->h.last_kernel_time;
    struct tm tmv;
    char when[32];
    gmtime_r(&t, &tmv);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tmv);
    printf("Last Kernel:     %s\n", when);
  }
  if (s->inferred_devices) printf("Devices:         %d (device_num is %d; the others inferred from limits/usage)\n", s->device_count, s->raw_device_num);
  for (d = 0; d < s->device_count; d++) {
    const dev_view_t *dv = &s->dev[d];
    if (o->device >= 0 && o->device != d) continue;
    printf("Device %d:%s%s\n", d, dv->uuid[0] ? " " : "", dv->uuid);
    if (dv->limit == 0) printf("  Total Memory:    unlimited\n");
    else {
      fmt_mb(mem, sizeof mem, dv->limit);
      printf("  Total Memory:    %s\n", mem);
    }
    fmt_mb(mem, sizeof mem, dv->used);
    printf("  Used Memory:     %s\n", mem);
    if (dv->dead_used != 0) {
      fmt_mb(mem, sizeof mem, dv->dead_used);
      printf("  Held By Gone:    %s (run --cleanup)\n", mem);
    }
    if (dv->sm_limit == 0 || dv->sm_limit >= 100) printf("  SM Limit:        none\n");
    else printf("  SM Limit:        %" PRIu64 "%%\n", dv->sm_limit);
    printf("  Task Count:      %d\n", dv->tasks);
    printf("  Tasks:\n");
    for (i = 0; i < s->nslots; i++) {
      const slot_view_t *sl = &s->slots[i];
      if (!device_in_use(sl, d) && s->device_count > 1) continue;
      print_task_line(sl, d, dv->sm_limit);
    }
  }
  if (o->device < 0) {
    for (i = 0; i < s->nslots; i++) {
      const slot_view_t *sl = &s->slots[i];
      int used = 0;
      for (d = 0; d < s->device_count; d++) used |= device_in_use(sl, d);
      if (used || s->device_count == 1) continue;
      if (!idle++) printf("Tasks without device usage:\n");
      printf("    PID: %d  Host PID: %d  Status: %s  Alive: %s\n", sl->pid, sl->hostpid, status_name(sl->status), vgpu_liveness_name(sl->live));
    }
  }
}

int cmd_inspect(const options_t *o) {
  /* static: the SIGBUS path in shrreg_tool_main reads it (g_mapped, g_held) after siglongjmp
   * has unwound this frame; one command runs per process. */
  static region_t r;
  snapshot_t s;
  int rc = region_open(&r, o->file, 0);
  if (rc != EXIT_OK) {
    region_close(&r);
    return rc;
  }
  rc = take_snapshot(&r, o, &s);
  if (rc == EXIT_OK && o->device >= 0 && o->device >= s.device_count)
    rc = fail(EXIT_USAGE, "--device %d: the region has %d device(s)", o->device, s.device_count);
  if (rc == EXIT_OK) {
    if (o->json) print_inspect_json(&r, &s, o);
    else print_inspect_text(&r, &s, o);
  }
  free(s.slots);
  region_close(&r);
  return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* --version */

static void loaded_library(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/maps", "re");
  char line[PATH_MAX + 128];
  out[0] = '\0';
  if (f == NULL) return;
  while (fgets(line, sizeof line, f) != NULL) {
    char *p = strchr(line, '/');
    if (p != NULL && strstr(p, "libvgpu") != NULL) {
      p[strcspn(p, "\n")] = '\0';
      snprintf(out, cap, "%s", p);
      break;
    }
  }
  fclose(f);
}

int cmd_version(const options_t *o) {
  /* static: the SIGBUS path in shrreg_tool_main reads it (g_mapped, g_held) after siglongjmp
   * has unwound this frame; one command runs per process. */
  static region_t r;
  char lib[PATH_MAX];
  char tmp[VGPU_LIB_VERSION_LEN + 1];
  struct vgpu_view_header h;
  int rc;
  loaded_library(lib, sizeof lib);
  rc = region_open(&r, o->file, 0);
  if (rc == EXIT_OK && r.v.lay == NULL) rc = EXIT_BAD_LAYOUT;
  if (rc == EXIT_OK) vgpu_region_view_header(&r.v, &h);
  if (o->json) {
    jw_t w = {stdout, 0, {1}};
    jw_open(&w, NULL, '{');
    jw_str(&w, "tool_version", SHRREG_TOOL_VERSION);
    jw_i64(&w, "abi_major", VGPU_REGION_MAJOR);
    jw_i64(&w, "abi_minor", VGPU_REGION_MINOR);
    jw_u64(&w, "abi_struct_size", sizeof(vgpu_region_t));
    if (lib[0]) jw_str(&w, "loaded_library", lib);
    else jw_null(&w, "loaded_library");
    jw_str(&w, "file", o->file);
    if (rc == EXIT_OK) {
      jw_str(&w, "layout", r.v.lay->label);
      if (h.major >= 0) {
        jw_i64(&w, "region_major", h.major);
        jw_i64(&w, "region_minor", h.minor);
      }
      if (r.v.map.ext != NULL) {
        copy_clean(tmp, sizeof tmp, r.v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
        jw_str(&w, "library_version", tmp);
      } else {
        jw_null(&w, "library_version");
      }
    } else {
      jw_null(&w, "layout");
    }
    jw_close(&w, '}');
  } else {
    printf("shrreg-tool %s\n", SHRREG_TOOL_VERSION);
    printf("shrreg size: %zu, version %d.%d\n", sizeof(vgpu_region_t), VGPU_REGION_MAJOR, VGPU_REGION_MINOR);
    printf("library loaded in this process: %s\n", lib[0] ? lib : "none");
    if (rc == EXIT_OK) {
      if (h.major >= 0)
        printf("region: %s: layout %s, version %d.%d\n", o->file, r.v.lay->label, h.major, h.minor);
      else printf("region: %s: layout %s, no version fields\n", o->file, r.v.lay->label);
      if (r.v.map.ext != NULL) {
        copy_clean(tmp, sizeof tmp, r.v.map.ext->lib_version, VGPU_LIB_VERSION_LEN);
        printf("library that created the region: %s\n", tmp[0] ? tmp : "libvgpu (unnamed)");
      } else {
        printf("library that created the region: HAMi-core or older libvgpu (no extension block)\n");
      }
    } else {
      printf("region: %s: not readable (see the error above)\n", o->file);
    }
  }
  region_close(&r);
  /* The versions of the tool are always printed; a missing region is reported but is not an error here. */
  return rc == EXIT_NO_FILE ? EXIT_OK : rc;
}
