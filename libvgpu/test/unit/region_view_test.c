/*
 * region_view_test.c — the region unit's entry points for tools (shrreg-tool links them):
 *   - the multi-layout view reads every HAMi-core layout from files written by compiler-laid-out
 *     mirrors of the historical structs (test/tools/fixtures.h), refuses what is not a region and
 *     hands out a lockable map only for the layouts the library writes;
 *   - the slot lock without recovery times out on a dead recorded owner and names it, where the
 *     library's own lock recovers; a live record-lock holder is named too;
 *   - releasing a stale lock clears only the records naming that holder and never posts a free
 *     semaphore (two releases = one post);
 *   - the lock state: free, held (record lock), stale record (kernel released it, or a dead
 *     semaphore owner), lost post (down, nobody recorded);
 *   - a multi-slot cleanup is one generation period: clearing a slot does not bump the
 *     generation, vgpu_region_free_slot does (by 2), trimming clamps a hostile proc_num;
 *   - liveness from a procfs-like directory: alive, gone, zombie, reused pid, unreadable, no pid,
 *     command names with spaces and parentheses; the heartbeat freshness rule.
 * Run: libvgpu/build/unit/region_view_test
 */
#include <errno.h>
#include <fcntl.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../tools/fixtures.h"
#include "region.h"
#include "vgpu.h"
#include "vgpu_unit.h"

static char g_dir[] = "/tmp/vgpu-view-XXXXXX";

static const char *path_of(const char *name) {
  static char buf[4][256];
  static int next;
  char *p = buf[next++ % 4];
  snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
  return p;
}

static fx_spec_t spec_of(fx_layout_t l) {
  fx_spec_t s;
  memset(&s, 0, sizeof s);
  s.layout = l;
  s.device_num = 2;
  s.limit[0] = 4ull << 30;
  s.limit[1] = 2ull << 30;
  s.sm_limit[0] = 50;
  s.sem_value = 1;
  s.nslots = 2;
  s.slots[0] = (fx_slot_t){.pid = 11, .hostpid = 1011, .status = 1, .used = {64 << 20, 0},
                           .sm_util = {30, 0}, .start_ticks = 777, .ext_pid_tag = 11};
  s.slots[1] = (fx_slot_t){.pid = 12, .hostpid = 1012, .status = 1, .used = {0, 32 << 20},
                           .start_ticks = 888, .ext_pid_tag = 99 /* moved by a compaction */};
  return s;
}

static int view_of(struct vgpu_region_view *v, const char *path, bool writable, const char **why) {
  int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) abort();
  return vgpu_region_view_map(v, fd, writable, why);
}

static void view_readsEveryLayout(void) {
  static const struct {
    fx_layout_t fx;
    vgpu_layout_id_t id;
    bool lockable, has_util, has_ext;
  } cases[] = {
      {FX_L0A, VGPU_LAYOUT_L0A, false, false, false},
      {FX_L0B, VGPU_LAYOUT_L0B, false, true, false},
      {FX_V1_1, VGPU_LAYOUT_V1_1, true, true, false},
      {FX_V1_1_BROKEN, VGPU_LAYOUT_V1_1_BROKEN, false, true, false},
      {FX_V1_2, VGPU_LAYOUT_V1_2, true, true, false},
      {FX_V1_2_EXT, VGPU_LAYOUT_V1_2, true, true, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *p = path_of("layout.cache");
    fx_spec_t s = spec_of(cases[i].fx);
    EXPECT(fx_write(p, &s) == 0);
    struct vgpu_region_view v;
    const char *why = NULL;
    EXPECT(view_of(&v, p, false, &why) == VGPU_VIEW_OK);
    if (v.lay == NULL) {
      fprintf(stderr, "  layout %zu: %s\n", i, why ? why : "?");
      vgpu_region_view_close(&v);
      continue;
    }
    EXPECT_EQ_U(v.lay->id, cases[i].id);
    EXPECT((v.map.r != NULL) == cases[i].lockable);
    EXPECT((v.map.ext != NULL) == cases[i].has_ext);
    EXPECT(v.ext_has_slots == cases[i].has_ext);
    EXPECT_EQ_U(vgpu_region_view_proc_num(&v), 2);
    EXPECT_EQ_U(vgpu_region_view_device_num(&v), 2);
    EXPECT_EQ_U(vgpu_region_view_limit(&v, false, 0), 4ull << 30);
    EXPECT_EQ_U(vgpu_region_view_limit(&v, false, 1), 2ull << 30);
    EXPECT_EQ_U(vgpu_region_view_limit(&v, true, 0), 50);
    const char *uuid1 = "GPU-00000000-0000-0000-0000-000000000001";
    EXPECT(strncmp(vgpu_region_view_uuid(&v, 1), uuid1, 40) == 0);
    struct vgpu_view_header h;
    vgpu_region_view_header(&v, &h);
    EXPECT_EQ_U(h.utilization_switch, 1);
    EXPECT_EQ_U(h.recent_kernel, 2);
    EXPECT_EQ_U(h.priority, 1);
    bool versioned = cases[i].fx != FX_L0A && cases[i].fx != FX_L0B;
    EXPECT(versioned ? h.major == 1 : h.major == -1);
    struct vgpu_slot_view sl;
    vgpu_region_view_read_slot(&v, 0, &sl);
    EXPECT(sl.pid == 11 && sl.hostpid == 1011 && sl.status == 1 && !sl.torn);
    EXPECT_EQ_U(sl.dev[0].total, 64 << 20);
    EXPECT_EQ_U(sl.dev[0].context, 16 << 20);
    EXPECT_EQ_U(sl.dev[0].data, 48 << 20);
    EXPECT_EQ_U(sl.dev[0].monitor, 64 << 20);
    EXPECT_EQ_U(sl.dev[0].sm_util, cases[i].has_util ? 30 : 0);
    EXPECT(sl.has_ext == cases[i].has_ext);
    if (cases[i].has_ext) EXPECT_EQ_U(sl.start_ticks, 777);
    vgpu_region_view_read_slot(&v, 1, &sl);
    EXPECT(sl.pid == 12 && sl.dev[1].total == 32 << 20);
    EXPECT(!sl.has_ext); /* its extension entry describes another pid */
    /* Writes need a writable view of a layout the library writes. */
    EXPECT_EQ_U(vgpu_region_view_set_limit(&v, true, 0, 20), 0);
    EXPECT_EQ_U(vgpu_region_view_limit(&v, true, 0), 50);
    vgpu_region_view_close(&v);
    EXPECT(view_of(&v, p, true, &why) == VGPU_VIEW_OK);
    EXPECT_EQ_U(vgpu_region_view_set_limit(&v, true, 0, 20), cases[i].lockable ? 50 : 0);
    EXPECT_EQ_U(vgpu_region_view_limit(&v, true, 0), cases[i].lockable ? 20 : 50);
    vgpu_region_view_close(&v);
  }
}

static void view_refusesWhatIsNotARegion(void) {
  struct vgpu_region_view v;
  const char *why = NULL;
  const char *p = path_of("tiny.cache");
  int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  EXPECT(write(fd, "abc", 3) == 3);
  close(fd);
  EXPECT(view_of(&v, p, false, &why) == VGPU_VIEW_E_TOO_SMALL);
  EXPECT_EQ_U(v.size, 3);
  vgpu_region_view_close(&v);
  /* The right size but no magic: mapped, no layout, a reason. */
  fx_spec_t s = spec_of(FX_V1_2);
  EXPECT(fx_write(p, &s) == 0);
  fd = open(p, O_RDWR);
  int32_t zero = 0;
  EXPECT(pwrite(fd, &zero, 4, 0) == 4);
  close(fd);
  EXPECT(view_of(&v, p, false, &why) == VGPU_VIEW_E_LAYOUT);
  EXPECT(why != NULL && strstr(why, "magic") != NULL);
  vgpu_region_view_close(&v);
  /* Oversized: refused before mapping. */
  fd = open(p, O_RDWR);
  EXPECT(ftruncate(fd, (off_t)VGPU_MAX_REGION_FILE_SIZE + 1) == 0);
  close(fd);
  EXPECT(view_of(&v, p, false, &why) == VGPU_VIEW_E_TOO_LARGE);
  EXPECT(v.base == NULL);
  vgpu_region_view_close(&v);
  /* A directory. */
  fd = open(g_dir, O_RDONLY | O_DIRECTORY);
  EXPECT(vgpu_region_view_map(&v, fd, false, &why) == VGPU_VIEW_E_NOT_REGULAR);
  vgpu_region_view_close(&v);
  /* A hostile proc_num and device_num are clamped. */
  s = spec_of(FX_V1_2);
  EXPECT(fx_write(p, &s) == 0);
  EXPECT(view_of(&v, p, true, &why) == VGPU_VIEW_OK);
  v.map.r->proc_num = 5000;
  v.map.r->device_num = UINT64_MAX;
  EXPECT_EQ_U(vgpu_region_view_proc_num(&v), VGPU_MAX_PROCS);
  EXPECT_EQ_U(vgpu_region_view_device_num(&v), VGPU_MAX_DEVICES);
  v.map.r->proc_num = -7;
  EXPECT_EQ_U(vgpu_region_view_proc_num(&v), 0);
  vgpu_region_view_close(&v);
}

/* A child takes the semaphore the HAMi-core way (sem_wait, owner_pid = self) and exits without
 * posting; returns its pid once reaped. */
static pid_t dead_sem_owner(const char *path) {
  pid_t p = fork();
  if (p == 0) {
    struct vgpu_region_view c;
    const char *why;
    if (view_of(&c, path, true, &why) != VGPU_VIEW_OK) _exit(3);
    sem_wait((sem_t *)(void *)c.map.r->sem);
    __atomic_store_n(&c.map.r->owner_pid, (uint64_t)getpid(), __ATOMIC_RELEASE);
    _exit(0);
  }
  waitpid(p, NULL, 0);
  return p;
}

static int sem_value(struct vgpu_region_map *m) {
  int v = -1;
  sem_getvalue((sem_t *)(void *)m->r->sem, &v);
  return v;
}

static void lockNoRecovery_namesDeadOwner_libraryLockRecovers(void) {
  const char *p = path_of("lock.cache");
  fx_spec_t s = spec_of(FX_V1_2_EXT);
  EXPECT(fx_write(p, &s) == 0);
  struct vgpu_region_view v;
  const char *why;
  EXPECT(view_of(&v, p, true, &why) == VGPU_VIEW_OK);
  /* Free: taken, recorded in the extension and as the semaphore owner, released cleanly. */
  pid_t holder = -1;
  EXPECT(vgpu_region_lock_no_recovery_for(&v.map, 200000000ull, &holder));
  EXPECT_EQ_U(v.map.ext->lock_holder_pid, getpid());
  EXPECT_EQ_U(v.map.r->owner_pid, getpid());
  EXPECT_EQ_U(sem_value(&v.map), 0);
  vgpu_region_unlock(&v.map);
  EXPECT_EQ_U(sem_value(&v.map), 1);
  EXPECT_EQ_U(v.map.ext->lock_holder_pid, 0);
  EXPECT_EQ_U(v.map.r->owner_pid, 0);

  pid_t dead = dead_sem_owner(p);
  uint64_t t0 = vgpu_now_monotonic_ns();
  EXPECT(!vgpu_region_lock_no_recovery_for(&v.map, 200000000ull, &holder));
  uint64_t waited = vgpu_now_monotonic_ns() - t0;
  EXPECT(waited >= 190000000ull && waited < 2000000000ull);
  EXPECT_EQ_U(holder, dead);
  EXPECT_EQ_U(sem_value(&v.map), 0); /* nothing posted, nothing recorded */
  EXPECT_EQ_U(v.map.r->owner_pid, dead);
  EXPECT_EQ_U(v.map.ext->lock_holder_pid, 0);
  EXPECT(vgpu_region_lock_holder(&v.map) == 0); /* the record lock was given back */
  struct vgpu_lock_view lk;
  vgpu_region_view_lock_state(&v, "/proc", vgpu_now_realtime_ns(), &lk);
  EXPECT(lk.state == VGPU_LOCK_STALE_RECORD && lk.holder_pid == dead);
  EXPECT(strcmp(lk.holder_source, "owner_pid") == 0 && lk.holder_live == VGPU_LIVE_GONE);
  /* The library's own lock recovers the dead owner. */
  EXPECT(vgpu_region_lock_for(&v.map, 2000000000ull));
  EXPECT_EQ_U(v.map.r->owner_pid, getpid());
  vgpu_region_unlock(&v.map);
  EXPECT_EQ_U(sem_value(&v.map), 1);

  /* A live holder of the record lock is named. */
  int ready[2];
  EXPECT(pipe(ready) == 0);
  pid_t live = fork();
  if (live == 0) {
    struct vgpu_region_view c;
    if (view_of(&c, p, true, &why) != VGPU_VIEW_OK) _exit(3);
    if (!vgpu_region_lock_no_recovery_for(&c.map, 1000000000ull, NULL)) _exit(4);
    if (write(ready[1], "x", 1) != 1) _exit(5);
    pause();
    _exit(0);
  }
  char ch;
  EXPECT(read(ready[0], &ch, 1) == 1);
  EXPECT(!vgpu_region_lock_no_recovery_for(&v.map, 100000000ull, &holder));
  EXPECT_EQ_U(holder, live);
  struct vgpu_lock_facts f;
  vgpu_region_view_lock_facts(&v, &f);
  EXPECT(f.has_sem && f.sem_value == 0);
  EXPECT_EQ_U(f.record_lock_pid, live);
  EXPECT_EQ_U(f.ext_holder_pid, live);
  EXPECT_EQ_U(f.owner_pid, live);
  vgpu_region_view_lock_state(&v, "/proc", vgpu_now_realtime_ns(), &lk);
  EXPECT(lk.state == VGPU_LOCK_HELD && lk.holder_pid == live && lk.record_lock_pid == live);
  EXPECT(strcmp(lk.holder_source, "extension") == 0 && lk.holder_live == VGPU_LIVE_ALIVE);
  kill(live, SIGKILL);
  waitpid(live, NULL, 0);
  /* The kernel dropped the record lock; the extension record is now stale. */
  vgpu_region_view_lock_state(&v, "/proc", vgpu_now_realtime_ns(), &lk);
  EXPECT(lk.state == VGPU_LOCK_STALE_RECORD && lk.holder_pid == live && lk.record_lock_pid == 0);
  EXPECT(lk.holder_live == VGPU_LIVE_GONE);
  close(ready[0]);
  close(ready[1]);
  vgpu_region_view_close(&v);
}

static void releaseStale_clearsOnlyThatHolder_neverPostsTwice(void) {
  const char *p = path_of("stale.cache");
  fx_spec_t s = spec_of(FX_V1_2_EXT);
  s.ext_lock_holder = 4242;
  EXPECT(fx_write(p, &s) == 0);
  struct vgpu_region_view v;
  const char *why;
  EXPECT(view_of(&v, p, true, &why) == VGPU_VIEW_OK);
  pid_t dead = dead_sem_owner(p);
  /* Another holder named: the records stay, but a down semaphore is posted. */
  EXPECT(vgpu_region_release_stale_lock(&v.map, 7));
  EXPECT_EQ_U(v.map.ext->lock_holder_pid, 4242);
  EXPECT_EQ_U(v.map.r->owner_pid, dead);
  EXPECT_EQ_U(sem_value(&v.map), 1);
  /* Now free: a second release posts nothing (the value stays 1), records naming it are cleared. */
  EXPECT(!vgpu_region_release_stale_lock(&v.map, dead));
  EXPECT_EQ_U(sem_value(&v.map), 1);
  EXPECT_EQ_U(v.map.r->owner_pid, 0);
  EXPECT(!vgpu_region_release_stale_lock(&v.map, 4242));
  EXPECT_EQ_U(v.map.ext->lock_holder_pid, 0);
  EXPECT_EQ_U(sem_value(&v.map), 1);
  struct vgpu_lock_view lk;
  vgpu_region_view_lock_state(&v, "/proc", vgpu_now_realtime_ns(), &lk);
  EXPECT(lk.state == VGPU_LOCK_FREE && lk.holder_pid == 0);
  /* Down with nobody recorded: a lost post. */
  sem_wait((sem_t *)(void *)v.map.r->sem);
  vgpu_region_view_lock_state(&v, "/proc", vgpu_now_realtime_ns(), &lk);
  EXPECT(lk.state == VGPU_LOCK_LOST && lk.holder_live == VGPU_LIVE_UNKNOWN);
  EXPECT(vgpu_region_release_stale_lock(&v.map, 0));
  EXPECT_EQ_U(sem_value(&v.map), 1);
  vgpu_region_view_close(&v);
}

static void clearSlot_noGenerationBump_trimClamps(void) {
  const char *p = path_of("slots.cache");
  fx_spec_t s = spec_of(FX_V1_2_EXT);
  s.nslots = 4;
  for (int i = 2; i < 4; i++)
    s.slots[i] = (fx_slot_t){.pid = 20 + i, .status = 1, .used = {1 << 20, 0}};
  EXPECT(fx_write(p, &s) == 0);
  struct vgpu_region_view v;
  const char *why;
  EXPECT(view_of(&v, p, true, &why) == VGPU_VIEW_OK);
  struct vgpu_region_map *m = &v.map;
  uint64_t g0 = m->ext->generation;
  vgpu_region_generation_begin(m);
  EXPECT_EQ_U(m->ext->generation, g0 + 1); /* odd: a pass is running */
  vgpu_region_clear_slot(m, 3);
  vgpu_region_clear_slot(m, 1);
  EXPECT_EQ_U(m->ext->generation, g0 + 1); /* clearing does not bump it */
  EXPECT_EQ_U(m->r->procs[3].pid, 0);
  EXPECT_EQ_U(m->r->procs[3].status, 0);
  EXPECT_EQ_U(m->r->procs[3].used[0].total, 0);
  EXPECT_EQ_U(m->r->procs[3].seqlock % 2, 0);
  EXPECT_EQ_U(m->ext->slots[1].start_time_ticks, 0);
  EXPECT_EQ_U(m->r->procs[0].pid, 11); /* the others stay where they are */
  EXPECT_EQ_U(m->r->procs[2].pid, 22);
  EXPECT_EQ_U(vgpu_region_trim_slots(m), 3); /* slot 3 trailing, slot 1 a hole */
  EXPECT_EQ_U(m->r->proc_num, 3);
  vgpu_region_generation_end(m);
  EXPECT_EQ_U(m->ext->generation, g0 + 2);
  /* The one-slot form brackets itself. */
  vgpu_region_free_slot(m, 2);
  EXPECT_EQ_U(m->ext->generation, g0 + 4);
  EXPECT_EQ_U(m->r->proc_num, 1);
  /* A hostile proc_num is clamped, not written back. */
  m->r->proc_num = 5000;
  EXPECT_EQ_U(vgpu_region_trim_slots(m), 1);
  m->r->proc_num = -3;
  EXPECT_EQ_U(vgpu_region_trim_slots(m), 0);
  vgpu_region_view_close(&v);
}

static void write_stat(const char *root, int pid, const char *stat_line) {
  char d[512], f[600];
  snprintf(d, sizeof d, "%s/%d", root, pid);
  mkdir(d, 0755);
  snprintf(f, sizeof f, "%s/stat", d);
  FILE *fp = fopen(f, "w");
  if (!fp) abort();
  fputs(stat_line, fp);
  fclose(fp);
}

static void liveness_fromProcRoot(void) {
  char root[300];
  snprintf(root, sizeof root, "%s/proc", g_dir);
  mkdir(root, 0755);
  /* Fields 3..22: state, then 18 numbers, the last being starttime 5555. */
  const char *tail = " 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5555 100 1\n";
  char line[256];
  snprintf(line, sizeof line, "10 (sleep) S%s", tail);
  write_stat(root, 10, line);
  snprintf(line, sizeof line, "11 (a) (b) c) Z%s", tail);
  write_stat(root, 11, line);
  snprintf(line, sizeof line, "12 (my app) R%s", tail);
  write_stat(root, 12, line);
  char dir13[400];
  snprintf(dir13, sizeof dir13, "%s/13", root);
  mkdir(dir13, 0755);
  snprintf(dir13, sizeof dir13, "%s/13/stat", root);
  mkdir(dir13, 0755); /* a stat that cannot be read: not judged dead */
  uint64_t start = 0;
  EXPECT(vgpu_proc_liveness(root, 10, 0, &start) == VGPU_LIVE_ALIVE);
  EXPECT_EQ_U(start, 5555);
  EXPECT(vgpu_proc_liveness(root, 10, 5555, NULL) == VGPU_LIVE_ALIVE);
  EXPECT(vgpu_proc_liveness(root, 12, 4444, NULL) == VGPU_LIVE_REUSED);
  EXPECT(vgpu_proc_liveness(root, 11, 0, NULL) == VGPU_LIVE_ZOMBIE);
  EXPECT(vgpu_proc_liveness(root, 14, 0, NULL) == VGPU_LIVE_GONE);
  EXPECT(vgpu_proc_liveness(root, 13, 0, NULL) == VGPU_LIVE_UNKNOWN);
  EXPECT(vgpu_proc_liveness(root, 0, 0, NULL) == VGPU_LIVE_NO_PID);
  EXPECT(vgpu_liveness_dead(VGPU_LIVE_REUSED) && !vgpu_liveness_dead(VGPU_LIVE_UNKNOWN));
  EXPECT(strcmp(vgpu_liveness_name(VGPU_LIVE_REUSED), "pid-reused") == 0);
  /* The heartbeat rule the sweep and the tool's cleanup share. */
  uint64_t now = 5000000000ull;
  EXPECT(vgpu_heartbeat_fresh(now - VGPU_HEARTBEAT_STALE_NS / 2, now));
  EXPECT(!vgpu_heartbeat_fresh(now - VGPU_HEARTBEAT_STALE_NS, now));
  EXPECT(vgpu_heartbeat_fresh(now + 1, now)); /* a clock step back: not judged stale */
  EXPECT(!vgpu_heartbeat_fresh(0, now));      /* never recorded */
  /* The real /proc through the library's own form. */
  uint64_t mine = 0;
  EXPECT(vgpu_proc_stat(getpid(), &mine) == 1 && mine != 0);
  EXPECT(vgpu_proc_liveness("/proc", getpid(), mine, NULL) == VGPU_LIVE_ALIVE);
  EXPECT(vgpu_proc_liveness("/proc", getpid(), mine + 1, NULL) == VGPU_LIVE_REUSED);
}

static void setup(void) {
  if (!mkdtemp(g_dir)) abort();
}

static void teardown(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

int main(int argc, char **argv) {
  static const struct unit_case cases[] = {
      CASE(view_readsEveryLayout),
      CASE(view_refusesWhatIsNotARegion),
      CASE(lockNoRecovery_namesDeadOwner_libraryLockRecovers),
      CASE(releaseStale_clearsOnlyThatHolder_neverPostsTwice),
      CASE(clearSlot_noGenerationBump_trimClamps),
      CASE(liveness_fromProcRoot),
  };
  setup();
  vgpu_region_wait_ns = 300000000ull; /* the library lock's orphan bound, kept short here */
  int rc = unit_run("region_view", cases, sizeof cases / sizeof cases[0], argc, argv);
  teardown();
  return rc;
}
