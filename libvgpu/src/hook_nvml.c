/*
 * hook_nvml.c — NVML memory queries inside the container show the virtual device:
 * total = limit (or the physical size if smaller), used = the container's tracked usage (clamped
 * to total), free = total - used. Never negative, never wrapped (HAMi #1181: "17 TB used").
 * No limit on the device: NVML's own answer. These hooks never create the region file: a process
 * that only runs nvidia-smi reads the existing one, or the environment's limit with zero usage.
 */
#include "hook.h"

#define VGPU_NVML_ERROR_FUNCTION_NOT_FOUND 13

/* Rewrites an NVML answer's three figures in place (*total comes in as the physical size); false
 * leaves them as the driver gave them. */
static bool virtualize(nvmlDevice_t device, unsigned long long *total, unsigned long long *used,
                       unsigned long long *free_b) {
  const unsigned long long phys_total = *total;
  if (vgpu_hook_depth > 0 || vgpu_config_get()->disabled || !vgpu_nvml.nvmlDeviceGetIndex)
    return false;
  unsigned int idx = 0;
  if (vgpu_nvml.nvmlDeviceGetIndex(device, &idx) != VGPU_NVML_SUCCESS || idx >= VGPU_MAX_DEVICES)
    return false;
  uint64_t limit = vgpu_mem_limit((int)idx);
  if (!limit) return false;
  uint64_t t = limit < phys_total ? limit : phys_total;
  uint64_t u = vgpu_mem_used((int)idx);
  if (u > t) u = t;
  *total = t;
  *used = u;
  *free_b = t - u;
  return true;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  vgpu_nvml_load();
  if (!vgpu_nvml.nvmlDeviceGetMemoryInfo) return VGPU_NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc = vgpu_nvml.nvmlDeviceGetMemoryInfo(device, memory);
  if (rc != VGPU_NVML_SUCCESS || !memory) return rc;
  virtualize(device, &memory->total, &memory->used, &memory->free);
  return rc;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
  vgpu_nvml_load();
  if (!vgpu_nvml.nvmlDeviceGetMemoryInfo_v2) return VGPU_NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlReturn_t rc = vgpu_nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
  if (rc != VGPU_NVML_SUCCESS || !memory) return rc;
  if (virtualize(device, &memory->total, &memory->used, &memory->free)) memory->reserved = 0;
  return rc;
}
