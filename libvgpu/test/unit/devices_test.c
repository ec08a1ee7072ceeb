/*
 * devices_test.c — CUDA ordinal -> region device: by uuid when NVML lists the devices (handles
 * CUDA_VISIBLE_DEVICES by index, by uuid, and FASTEST_FIRST order), by the CUDA_VISIBLE_DEVICES
 * index otherwise; uuid formatting identical to NVML's.
 */
#include "devices.h"
#include "vgpu_unit.h"

static char nv[3][VGPU_UUID_LEN] = {"GPU-aaaa", "GPU-bbbb", "GPU-cccc"};

static void mapOrdinal_byUuid_whenNvmlKnowsIt(void) {
  EXPECT_EQ_U(vgpu_map_ordinal("2,0", 0, "GPU-cccc", nv, 3), 2);
  EXPECT_EQ_U(vgpu_map_ordinal("GPU-bbbb", 0, "GPU-bbbb", nv, 3), 1);
  EXPECT_EQ_U(vgpu_map_ordinal(NULL, 1, "GPU-aaaa", nv, 3), 0); /* FASTEST_FIRST reorder */
}

static void mapOrdinal_byCvdIndex_withoutNvml(void) {
  EXPECT_EQ_U(vgpu_map_ordinal("1,0", 0, "GPU-x", nv, 0), 1);
  EXPECT_EQ_U(vgpu_map_ordinal("1,0", 1, "GPU-x", nv, 0), 0);
  EXPECT_EQ_U(vgpu_map_ordinal("3,5,7", 2, "", nv, 0), 7);
  EXPECT_EQ_U(vgpu_map_ordinal(NULL, 2, "", nv, 0), 2);
  EXPECT_EQ_U(vgpu_map_ordinal("GPU-zzzz,1", 0, "", nv, 0), 0); /* uuid without NVML: ordinal */
  EXPECT_EQ_U(vgpu_map_ordinal("", 3, "", nv, 0), 3);
  EXPECT_EQ_U((unsigned)vgpu_map_ordinal(NULL, 16, "", nv, 0), (unsigned)-1);
  EXPECT_EQ_U(vgpu_map_ordinal("99", 0, "", nv, 0), 0); /* out of range index: ordinal */
}

static void formatUuid_matchesNvml(void) {
  unsigned char b[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                         0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  char out[64];
  vgpu_format_uuid(b, out, sizeof out);
  EXPECT(strcmp(out, "GPU-12345678-9abc-def0-0123-456789abcdef") == 0);
}

UNIT_MAIN("devices", CASE(mapOrdinal_byUuid_whenNvmlKnowsIt), CASE(mapOrdinal_byCvdIndex_withoutNvml),
          CASE(formatUuid_matchesNvml))
