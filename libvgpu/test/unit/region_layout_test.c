/*
 * region_layout_test.c — the bytes libvgpu writes are HAMi-core's v1.2 layout (checked at raw file
 * offsets, not through our own struct), our extension lands at VGPU_EXT_OFFSET, and files of any
 * other layout or version are refused and left byte-for-byte untouched.
 */
#include <fcntl.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "region.h"
#include "vgpu_unit.h"

static char g_dir[] = "/tmp/vgpu-layout-XXXXXX";

static const char *path(const char *name) {
  static char buf[256];
  snprintf(buf, sizeof buf, "%s/%s", g_dir, name);
  return buf;
}

static uint64_t rd(const char *p, off_t off, size_t n) {
  int fd = open(p, O_RDONLY);
  uint64_t v = 0;
  if (fd < 0 || pread(fd, &v, n, off) != (ssize_t)n) v = UINT64_MAX;
  if (fd >= 0) close(fd);
  return v;
}

static off_t fsize(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 ? st.st_size : -1;
}

static struct vgpu_region_init sample_init(void) {
  struct vgpu_region_init in;
  memset(&in, 0, sizeof in);
  in.device_num = 2;
  strcpy(in.uuids[0], "GPU-11111111-2222-3333-4444-555555555555");
  strcpy(in.uuids[1], "GPU-66666666-7777-8888-9999-000000000000");
  for (int d = 0; d < VGPU_MAX_DEVICES; d++) in.sm_limit[d] = 100;
  in.limit[0] = 3000ull << 20;
  in.limit[1] = 1ull << 30;
  in.sm_limit[0] = 30;
  in.priority = 0;
  in.pod_uid = "0f1e2d3c-aaaa-bbbb-cccc-111122223333";
  in.container_name = "trainer";
  return in;
}

static void create_newFile_writesHamiV12Bytes(void) {
  const char *p = path("new.cache");
  struct vgpu_region_init in = sample_init();
  struct vgpu_region_map m;
  EXPECT(vgpu_region_open(&m, p, &in) == VGPU_REGION_OK);
  EXPECT(m.created);
  EXPECT_EQ_U(fsize(p), VGPU_REGION_FILE_SIZE);
  EXPECT_EQ_U(rd(p, 0, 4), 0x012FF74E); /* bytes 4e f7 2f 01 */
  EXPECT_EQ_U(rd(p, 4, 4), 1);
  EXPECT_EQ_U(rd(p, 8, 4), 2);
  EXPECT_EQ_U(rd(p, 12, 4), 0);  /* sm_init_flag */
  EXPECT_EQ_U(rd(p, 16, 8), 0);  /* owner_pid: nobody holds HAMi's semaphore */
  EXPECT_EQ_U(rd(p, 56, 8), 2);  /* device_num */
  EXPECT_EQ_U(rd(p, 64, 4), 0x2d555047); /* "GPU-" */
  EXPECT_EQ_U(rd(p, 64 + 96, 8), 0x363636362d555047ull); /* "GPU-6666" */
  EXPECT_EQ_U(rd(p, 64 + 2 * 96, 1), 0);                  /* unused uuid slots empty */
  EXPECT_EQ_U(rd(p, 1600, 8), 3000ull << 20);
  EXPECT_EQ_U(rd(p, 1608, 8), 1ull << 30);
  EXPECT_EQ_U(rd(p, 1728, 8), 30);
  EXPECT_EQ_U(rd(p, 1736, 8), 100);
  EXPECT_EQ_U(rd(p, 2008896, 4), 0); /* proc_num */
  EXPECT_EQ_U(rd(p, 2008900, 4), 1); /* utilization_switch */
  EXPECT_EQ_U(rd(p, 2008904, 4), 2); /* recent_kernel */
  EXPECT_EQ_U(rd(p, 2008908, 4), 0); /* priority */
  uint64_t t = rd(p, 2008912, 8);
  EXPECT(t + 5 >= (uint64_t)time(NULL) && t <= (uint64_t)time(NULL));
  int v = -1;
  EXPECT(sem_getvalue((sem_t *)(void *)m.r->sem, &v) == 0 && v == 1); /* usable by HAMi-core */
  EXPECT_EQ_U(rd(p, VGPU_EXT_OFFSET, 4), VGPU_EXT_MAGIC);
  EXPECT_EQ_U(rd(p, VGPU_EXT_OFFSET + 4, 2), VGPU_EXT_MAJOR);
  EXPECT_EQ_U(rd(p, VGPU_EXT_OFFSET + 8, 4), sizeof(vgpu_region_ext_t));
  EXPECT(strcmp(m.ext->pod_uid, in.pod_uid) == 0);
  EXPECT(strcmp(m.ext->container_name, "trainer") == 0);
  EXPECT(strncmp(m.ext->lib_version, "libvgpu", 7) == 0);
  struct stat st;
  EXPECT(stat(p, &st) == 0 && (st.st_mode & 0777) == 0666);
  vgpu_region_close(&m);
}

static void claimAndAdd_writeHamiSlotOffsets(void) {
  const char *p = path("slots.cache");
  struct vgpu_region_init in = sample_init();
  struct vgpu_region_map m;
  EXPECT(vgpu_region_open(&m, p, &in) == VGPU_REGION_OK);
  struct vgpu_slot_identity id = {.pid = getpid(), .hostpid = 4321, .hostpid_source = 2,
                                  .start_time_ticks = 777};
  vgpu_region_lock(&m);
  int idx = vgpu_region_claim_slot(&m, &id);
  vgpu_region_unlock(&m);
  EXPECT_EQ_U(idx, 0);
  vgpu_slot_add(&m, idx, 1, VGPU_MEM_DATA, 100);
  vgpu_slot_add(&m, idx, 1, VGPU_MEM_CONTEXT, 7);
  vgpu_slot_add(&m, idx, 1, VGPU_MEM_DATA, -1000); /* clamps, never wraps */
  vgpu_slot_add(&m, idx, 1, VGPU_MEM_DATA, 50);
  off_t s = 1856;
  EXPECT_EQ_U(rd(p, s + 0, 4), (uint64_t)getpid());
  EXPECT_EQ_U(rd(p, s + 4, 4), 4321);
  EXPECT_EQ_U(rd(p, s + 8 + 64 + 0, 8), 7);   /* used[1].context_size */
  EXPECT_EQ_U(rd(p, s + 8 + 64 + 16, 8), 50); /* used[1].data_size */
  EXPECT_EQ_U(rd(p, s + 8 + 64 + 32, 8), 50); /* used[1].total (clamped at 0, then +50) */
  EXPECT_EQ_U(rd(p, s + 1928, 4), 1);          /* status running */
  EXPECT_EQ_U(rd(p, s + 1936, 8) % 2, 0);      /* seqlock even */
  EXPECT(rd(p, s + 1936, 8) >= 8);             /* bumped by every write */
  EXPECT_EQ_U(rd(p, 2008896, 4), 1);           /* proc_num */
  EXPECT_EQ_U(vgpu_region_used(&m, 1), 50);
  EXPECT_EQ_U(m.ext->slots[0].start_time_ticks, 777);
  EXPECT_EQ_U(m.ext->slots[0].hostpid_source, 2);
  EXPECT_EQ_U(m.ext->generation % 2, 0);
  EXPECT(m.ext->generation >= 2);
  vgpu_region_lock(&m);
  vgpu_region_free_slot(&m, idx);
  vgpu_region_unlock(&m);
  EXPECT_EQ_U(rd(p, s + 1928, 4), 0);
  EXPECT_EQ_U(rd(p, s + 0, 4), 0);
  EXPECT_EQ_U(rd(p, 2008896, 4), 0);
  EXPECT_EQ_U(vgpu_region_used(&m, 1), 0);
  vgpu_region_close(&m);
}

static void write_file(const char *p, off_t size, int32_t magic, uint32_t major, uint32_t minor) {
  int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
  uint32_t hdr[3] = {(uint32_t)magic, major, minor};
  if (fd < 0 || pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr || ftruncate(fd, size) != 0)
    abort();
  uint64_t lim = 123456789;
  if (size > 1608 && pwrite(fd, &lim, 8, 1600) != 8) abort();
  close(fd);
}

static uint64_t checksum(const char *p) {
  int fd = open(p, O_RDONLY);
  uint64_t h = 1469598103934665603ull;
  unsigned char buf[65536];
  ssize_t n;
  while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0)
    for (ssize_t i = 0; i < n; i++) h = (h ^ buf[i]) * 1099511628211ull;
  if (fd >= 0) close(fd);
  return h;
}

static void open_foreignLayouts_refusedAndUntouched(void) {
  static const struct {
    off_t size;
    uint32_t major, minor;
  } t[] = {{804681, 0, 0}, {804680, 0, 0}, {1197897, 0, 0}, {2008985, 1, 1},
           {2008984, 1, 1}, {2008953, 2, 0}, {2008953, 1, 3}, {2008953, 0, 0}, {100, 1, 2}};
  struct vgpu_region_init in = sample_init();
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
    const char *p = path("foreign.cache");
    write_file(p, t[i].size, 19920718, t[i].major, t[i].minor);
    uint64_t before = checksum(p);
    struct vgpu_region_map m;
    int rc = vgpu_region_open(&m, p, &in);
    if (rc != VGPU_REGION_E_VERSION) fprintf(stderr, "  case %zu: rc %d\n", i, rc);
    EXPECT(rc == VGPU_REGION_E_VERSION);
    EXPECT(m.found[0] != 0);
    EXPECT_EQ_U(checksum(p), before);
    EXPECT_EQ_U(fsize(p), t[i].size);
  }
}

static void open_hamiV11File_adoptedAndGrown(void) {
  const char *p = path("hami.cache");
  write_file(p, 2008953, 19920718, 1, 1); /* what HAMi-core v1.1 creates: sizeof + 1 byte */
  struct vgpu_region_init in = sample_init();
  struct vgpu_region_map m;
  EXPECT(vgpu_region_open(&m, p, &in) == VGPU_REGION_OK);
  EXPECT(!m.created);
  EXPECT_EQ_U(fsize(p), VGPU_REGION_FILE_SIZE);
  EXPECT_EQ_U(rd(p, 8, 4), 1);                   /* its version is kept */
  EXPECT_EQ_U(rd(p, 1600, 8), 123456789);        /* its limits win (first process wins) */
  EXPECT_EQ_U(rd(p, VGPU_EXT_OFFSET, 4), VGPU_EXT_MAGIC);
  vgpu_region_close(&m);
}

static void open_noMagic_reinitialized(void) {
  const char *p = path("garbage.cache");
  write_file(p, 5000, 0x11223344, 9, 9); /* a creator died before storing the magic */
  struct vgpu_region_init in = sample_init();
  struct vgpu_region_map m;
  EXPECT(vgpu_region_open(&m, p, &in) == VGPU_REGION_OK);
  EXPECT(m.created);
  EXPECT_EQ_U(rd(p, 0, 4), 19920718);
  EXPECT_EQ_U(rd(p, 8, 4), 2);
  vgpu_region_close(&m);
}

static void open_symlinkOrFifo_refusedWithoutBlocking(void) {
  struct vgpu_region_init in = sample_init();
  struct vgpu_region_map m;
  char target[256];
  snprintf(target, sizeof target, "%s", path("new.cache"));
  EXPECT(symlink(target, path("link.cache")) == 0);
  EXPECT(vgpu_region_open(&m, path("link.cache"), &in) == VGPU_REGION_E_NOT_REGULAR);
  EXPECT(mkfifo(path("fifo.cache"), 0600) == 0);
  EXPECT(vgpu_region_open(&m, path("fifo.cache"), &in) == VGPU_REGION_E_NOT_REGULAR);
  EXPECT(mkdir(path("dir.cache"), 0700) == 0);
  EXPECT(vgpu_region_open(&m, path("dir.cache"), &in) != VGPU_REGION_OK);
}

static void openExisting_readsWhatOpenWrote(void) {
  struct vgpu_region_map m;
  EXPECT(vgpu_region_open_existing(&m, path("new.cache"), false) == VGPU_REGION_OK);
  EXPECT(m.ext != NULL);
  EXPECT_EQ_U(m.r->limit[0], 3000ull << 20);
  vgpu_region_close(&m);
  EXPECT(vgpu_region_open_existing(&m, path("absent.cache"), false) != VGPU_REGION_OK);
}

int main(int argc, char **argv) {
  if (!mkdtemp(g_dir)) return 1;
  static const struct unit_case cases[] = {
      CASE(create_newFile_writesHamiV12Bytes), CASE(claimAndAdd_writeHamiSlotOffsets),
      CASE(open_foreignLayouts_refusedAndUntouched), CASE(open_hamiV11File_adoptedAndGrown),
      CASE(open_noMagic_reinitialized), CASE(open_symlinkOrFifo_refusedWithoutBlocking),
      CASE(openExisting_readsWhatOpenWrote)};
  int rc = unit_run("region_layout", cases, sizeof cases / sizeof cases[0], argc, argv);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  if (system(cmd) != 0) rc = 1;
  return rc;
}
