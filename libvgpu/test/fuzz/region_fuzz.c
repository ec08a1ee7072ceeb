/*
 * region_fuzz.c — libFuzzer harness for libvgpu's region opener (vgpu_region_open and
 * vgpu_region_open_existing) and the readers that trust the mapped bytes (vgpu_region_used,
 * vgpu_slot_total, vgpu_region_slot_alive, vgpu_region_lock_holder).
 *
 * The file a process finds at CUDA_DEVICE_MEMORY_SHARED_CACHE is written by other tenants' code:
 * any size, any bytes. Input layout: byte 0 picks the file size class (empty, tiny, HAMi v1.1 and
 * L0 sizes, one short of a region, exact, larger), byte 1 picks the base (zeros or a valid region
 * made by libvgpu itself), the rest is a list of patches {offset:3 bytes, len:1 byte, bytes}
 * applied to the base (offsets scaled over the whole file, so headers, slots and the extension
 * all get hit). Files live on /dev/shm (tmpfs) when it exists. Invariant besides "no crash":
 * a file the opener refuses as another version or layout (E_VERSION) is left byte for byte as it
 * was (never migrated half-way, never truncated).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "region.h"
#include "vgpu.h"

static char g_path[256];
static char g_valid_path[256];
static uint8_t *g_valid; /* a region libvgpu created, VGPU_REGION_FILE_SIZE bytes */

static void make_valid(void) {
  const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(g_path, sizeof g_path, "%s/vgpu-region-fuzz.%d", dir, (int)getpid());
  snprintf(g_valid_path, sizeof g_valid_path, "%s/vgpu-region-fuzz-valid.%d", dir, (int)getpid());
  unlink(g_valid_path);
  struct vgpu_region_init in;
  memset(&in, 0, sizeof in);
  in.device_num = 2;
  snprintf(in.uuids[0], sizeof in.uuids[0], "GPU-fuzz-0");
  snprintf(in.uuids[1], sizeof in.uuids[1], "GPU-fuzz-1");
  in.limit[0] = 1ull << 30;
  in.limit[1] = 2ull << 30;
  in.sm_limit[0] = 50;
  in.sm_limit[1] = 100;
  in.pod_uid = "fuzz";
  in.container_name = "fuzz";
  struct vgpu_region_map m;
  if (vgpu_region_open(&m, g_valid_path, &in) != VGPU_REGION_OK) abort();
  vgpu_region_lock(&m);
  struct vgpu_slot_identity id = {.pid = getpid(), .hostpid = getpid(), .hostpid_source = 1};
  int idx = vgpu_region_claim_slot(&m, &id);
  if (idx >= 0) vgpu_slot_add(&m, idx, 0, VGPU_MEM_DATA, 4096);
  vgpu_region_unlock(&m);
  g_valid = malloc(VGPU_REGION_FILE_SIZE);
  memcpy(g_valid, m.r, VGPU_REGION_FILE_SIZE);
  vgpu_region_close(&m);
  unlink(g_valid_path);
}

static const size_t k_sizes[] = {0, 11, 12, 4096, 1197897 /* L0-ish */, 1393864, 2008959,
                                 2008960, 0 /* exact */, 0 /* exact + 4096 */};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!g_valid) make_valid();
  if (size < 2) return 0;
  size_t fsize = k_sizes[data[0] % (sizeof k_sizes / sizeof k_sizes[0])];
  if (data[0] % 10 == 8) fsize = VGPU_REGION_FILE_SIZE;
  if (data[0] % 10 == 9) fsize = VGPU_REGION_FILE_SIZE + 4096;
  uint8_t *buf = calloc(1, fsize ? fsize : 1);
  if (!buf) return 0;
  if (data[1] & 1) memcpy(buf, g_valid, fsize < VGPU_REGION_FILE_SIZE ? fsize : VGPU_REGION_FILE_SIZE);
  else if (fsize >= 12) { /* zeros with the magic and a version from the input */
    int32_t magic = VGPU_REGION_MAGIC;
    memcpy(buf, &magic, 4);
    buf[4] = data[1] >> 4;
    buf[8] = data[1] >> 1 & 7;
  }
  for (size_t i = 2; i + 4 <= size && fsize > 0;) {
    size_t off = ((size_t)data[i] << 16 | (size_t)data[i + 1] << 8 | data[i + 2]);
    off = (size_t)((unsigned long long)off * fsize >> 24); /* spread over the file */
    size_t len = data[i + 3] % 16;
    i += 4;
    for (size_t k = 0; k < len && i < size; k++, i++)
      if (off + k < fsize) buf[off + k] = data[i];
  }
  int fd = open(g_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) abort();
  if (fsize && write(fd, buf, fsize) != (ssize_t)fsize) abort();
  close(fd);

  struct vgpu_region_map m;
  int rc = vgpu_region_open_existing(&m, g_path, false);
  if (rc == VGPU_REGION_OK) {
    for (int d = 0; d < VGPU_MAX_DEVICES; d++) (void)vgpu_region_used(&m, d);
    for (int s = 0; s < 8; s++) (void)vgpu_slot_total(&m, s, s % VGPU_MAX_DEVICES);
    (void)vgpu_region_lock_holder(&m);
    vgpu_region_close(&m);
  }
  rc = vgpu_region_open(&m, g_path, NULL);
  if (rc == VGPU_REGION_OK) {
    if (m.r->device_num > VGPU_MAX_DEVICES && m.created) abort(); /* we never write nonsense */
    for (int d = 0; d < VGPU_MAX_DEVICES; d++) (void)vgpu_region_used(&m, d);
    for (int s = 0; s < 4; s++) (void)vgpu_region_slot_alive(&m, s, vgpu_now_monotonic_ns());
    vgpu_region_close(&m);
  } else if (rc == VGPU_REGION_E_VERSION) {
    /* Another library's or layout's region is refused and left exactly as it was. */
    struct stat st;
    if (stat(g_path, &st) != 0 || (size_t)st.st_size != fsize) abort();
    uint8_t *now = malloc(fsize ? fsize : 1);
    int rfd = open(g_path, O_RDONLY | O_CLOEXEC);
    if (!now || rfd < 0 || (fsize && read(rfd, now, fsize) != (ssize_t)fsize)) abort();
    close(rfd);
    if (fsize && memcmp(now, buf, fsize) != 0) {
      fprintf(stderr, "region_fuzz: a refused region was modified\n");
      abort();
    }
    free(now);
  } else if (rc != VGPU_REGION_E_IO) {
    fprintf(stderr, "region_fuzz: unexpected open result %d\n", rc);
    abort();
  }
  free(buf);
  return 0;
}
