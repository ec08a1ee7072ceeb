/*
 * devices.c — see devices.h.
 */
#include "devices.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "real.h"

#define VGPU_MAX_CUDA_DEVICES 64

static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_mapped; /* atomic: 1 once g_ridx is final */
static int g_ndev;
static int g_ridx[VGPU_MAX_CUDA_DEVICES];
static char g_nvml_uuids[VGPU_MAX_DEVICES][VGPU_UUID_LEN];
static int g_nvml_count = -1; /* -1 not queried, 0 no NVML */

void vgpu_format_uuid(const unsigned char b[16], char *out, size_t cap) {
  snprintf(out, cap,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

int vgpu_map_ordinal(const char *cvd, int ordinal, const char *cuda_uuid,
                     char nvml_uuids[][VGPU_UUID_LEN], int nvml_count) {
  /* Best: the same physical device by uuid (covers CVD by index, by uuid and FASTEST_FIRST). */
  if (cuda_uuid && *cuda_uuid)
    for (int i = 0; i < nvml_count; i++)
      if (strcmp(nvml_uuids[i], cuda_uuid) == 0) return i;
  /* Without NVML: the ordinal-th CUDA_VISIBLE_DEVICES entry if it is a number. */
  if (cvd && *cvd) {
    const char *p = cvd;
    for (int i = 0; i < ordinal && p; i++) {
      p = strchr(p, ',');
      if (p) p++;
    }
    if (p) {
      char tok[32];
      size_t n = strcspn(p, ",");
      if (n < sizeof tok) {
        memcpy(tok, p, n);
        tok[n] = 0;
        uint64_t v = 0;
        if (vgpu_parse_uint(tok, &v) == VGPU_PARSE_OK && v < VGPU_MAX_DEVICES) return (int)v;
      }
    }
  }
  return ordinal < VGPU_MAX_DEVICES ? ordinal : -1;
}

static void query_nvml(void) {
  if (g_nvml_count >= 0) return;
  g_nvml_count = 0;
  if (!vgpu_nvml_load() || !vgpu_nvml.nvmlDeviceGetCount_v2 ||
      !vgpu_nvml.nvmlDeviceGetHandleByIndex_v2 || !vgpu_nvml.nvmlDeviceGetUUID)
    return;
  unsigned int n = 0;
  if (vgpu_nvml.nvmlDeviceGetCount_v2(&n) != VGPU_NVML_SUCCESS) return;
  if (n > VGPU_MAX_DEVICES) n = VGPU_MAX_DEVICES;
  for (unsigned int i = 0; i < n; i++) {
    nvmlDevice_t h = NULL;
    if (vgpu_nvml.nvmlDeviceGetHandleByIndex_v2(i, &h) != VGPU_NVML_SUCCESS ||
        vgpu_nvml.nvmlDeviceGetUUID(h, g_nvml_uuids[i], VGPU_UUID_LEN) != VGPU_NVML_SUCCESS)
      g_nvml_uuids[i][0] = 0;
    g_nvml_uuids[i][VGPU_UUID_LEN - 1] = 0;
  }
  g_nvml_count = (int)n;
}

static bool cuda_uuid(int ordinal, char *out, size_t cap) {
  CUdevice dev = 0;
  CUuuid u;
  out[0] = 0;
  if (!vgpu_cuda.cuDeviceGet || !vgpu_cuda.cuDeviceGetUuid_v2) return false;
  if (vgpu_cuda.cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS) return false;
  if (vgpu_cuda.cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS) return false;
  vgpu_format_uuid((const unsigned char *)u.bytes, out, cap);
  return true;
}

static void map_devices(void) {
  if (__atomic_load_n(&g_mapped, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&g_dev_mu);
  int n = 0;
  if (!g_mapped && vgpu_cuda.cuDeviceGetCount && vgpu_cuda.cuDeviceGetCount(&n) == CUDA_SUCCESS) {
    query_nvml();
    if (n > VGPU_MAX_CUDA_DEVICES) n = VGPU_MAX_CUDA_DEVICES;
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    for (int c = 0; c < n; c++) {
      char u[VGPU_UUID_LEN];
      cuda_uuid(c, u, sizeof u);
      g_ridx[c] = vgpu_map_ordinal(cvd, c, u, g_nvml_uuids, g_nvml_count);
      VGPU_LOG_DEBUG("CUDA device %d (%s) -> region device %d", c, u, g_ridx[c]);
    }
    g_ndev = n;
    __atomic_store_n(&g_mapped, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_dev_mu);
}

int vgpu_ridx(CUdevice dev) {
  map_devices();
  if (!__atomic_load_n(&g_mapped, __ATOMIC_ACQUIRE) || dev < 0 || dev >= g_ndev) return -1;
  return g_ridx[dev];
}

int vgpu_current_ridx(void) {
  CUdevice dev = -1;
  if (!vgpu_cuda.cuCtxGetDevice || vgpu_cuda.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return -1;
  return vgpu_ridx(dev);
}

void vgpu_devices_fill_init(struct vgpu_region_init *init) {
  map_devices();
  pthread_mutex_lock(&g_dev_mu);
  query_nvml();
  if (g_nvml_count > 0) {
    init->device_num = (uint64_t)g_nvml_count;
    memcpy(init->uuids, g_nvml_uuids, sizeof g_nvml_uuids);
  } else {
    int max = -1;
    for (int c = 0; c < g_ndev; c++) {
      int r = g_ridx[c];
      if (r < 0) continue;
      cuda_uuid(c, init->uuids[r], VGPU_UUID_LEN);
      if (r > max) max = r;
    }
    init->device_num = (uint64_t)(max + 1);
  }
  pthread_mutex_unlock(&g_dev_mu);
}

