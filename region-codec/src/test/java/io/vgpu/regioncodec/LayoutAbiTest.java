package io.vgpu.regioncodec;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.regioncodec.internal.Extension;
import io.vgpu.regioncodec.internal.Geometry;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Compiles {@code src/test/c/layout_dump.c} against libvgpu's {@code vgpu_region.h} with gcc and
 * compares every size and offset it prints with the codec's constants: the C header is the single
 * source of truth, and this test keeps Java from drifting. A second program, {@code
 * region_write.c}, fills the header's structs and must produce exactly the bytes of {@link
 * RegionWriter}. A third, {@code legacy_layouts.c}, declares L0a, L0b and v1.1-broken from their
 * field lists and lets gcc compute the offsets the codec hard-codes for them. Skipped (with a
 * message) only when gcc is not on the PATH.
 */
class LayoutAbiTest {
  @TempDir Path dir;

  @Test
  void cHeaderLayout_matchesCodecConstants() throws Exception {
    Map<String, Long> c = compileAndRun();
    Map<String, Long> java = javaLayout();
    assertThat(new TreeMap<>(c)).isEqualTo(new TreeMap<>(java));
  }

  @Test
  void geometryOfV12_endsWhereHeaderSaysAndSlotsDoNotOverlapTail() {
    Geometry g = Geometry.of(Layout.V1_2);
    assertThat(g.slotBase(1024)).isEqualTo(g.procNumOffset);
    assertThat(g.semPostinitOffset + Geometry.SEM_SIZE).isEqualTo(Layout.V1_2.structSize());
    Geometry broken = Geometry.of(Layout.V1_1_BROKEN);
    assertThat(broken.lastKernelTimeOffset + 8 + 32).isEqualTo(Layout.V1_1_BROKEN.structSize());
    for (Layout layout : Layout.values()) {
      Geometry l = Geometry.of(layout);
      assertThat((long) l.priorityOffset + 4).isLessThanOrEqualTo(layout.structSize());
      assertThat(l.slotStatusOffset + 4).isLessThanOrEqualTo(l.slotSize);
    }
    assertThat(Geometry.of(Layout.L0A).priorityOffset + 4).isEqualTo(Layout.L0A.structSize());
    assertThat(Geometry.of(Layout.L0B).priorityOffset + 4).isEqualTo(Layout.L0B.structSize());
  }

  @Test
  void cStructsWrittenByLibvgpuHeader_equalWriterBytesAndReadBack() throws Exception {
    Path binary = compile("region_write.c");
    Path file = dir.resolve("c-written.cache");
    run(binary.toString(), file.toString());
    RegionSpec spec = Fixtures.withExtension();
    RegionCodecProperties.assertSameBytes(RegionWriter.encode(spec), Files.readAllBytes(file));
    try (RegionFile region = RegionFile.openReadOnly(file)) {
      assertThat(region.layout()).isEqualTo(Layout.V1_2);
      assertThat(region.snapshot()).isEqualTo(Fixtures.expected(spec, 0));
    }
  }

  @Test
  void legacyLayoutsCompiledFromFieldLists_matchGeometryOffsets() throws Exception {
    String output = run(compile("legacy_layouts.c").toString());
    int compared = 0;
    for (String line : output.strip().lines().toList()) {
      int dot = line.indexOf('.');
      int space = line.indexOf(' ');
      Layout layout = Layout.valueOf(line.substring(0, dot));
      String field = line.substring(dot + 1, space);
      long expected = Long.parseLong(line.substring(space + 1));
      Object actual = Geometry.class.getField(field).get(Geometry.of(layout));
      assertThat(((Number) actual).longValue()).as(line).isEqualTo(expected);
      compared++;
    }
    assertThat(compared).isEqualTo(3 * 18 + 2 + 7);
  }

  /**
   * libvgpu's own table of every layout (VGPU_LAYOUTS in vgpu_region.h, what shrreg-tool reads
   * with) against the codec's Geometry: one definition on the C side, checked against the Java one.
   */
  @Test
  void libvgpuLayoutTable_matchesGeometryForEveryLayout() throws Exception {
    String output = run(compile("header_layouts.c").toString());
    Map<Layout, Integer> perLayout = new java.util.EnumMap<>(Layout.class);
    for (String line : output.strip().lines().toList()) {
      int dot = line.indexOf('.');
      int space = line.indexOf(' ');
      Layout layout = Layout.valueOf(line.substring(0, dot));
      String field = line.substring(dot + 1, space);
      long expected = Long.parseLong(line.substring(space + 1));
      Object actual = Geometry.class.getField(field).get(Geometry.of(layout));
      assertThat(((Number) actual).longValue()).as(line).isEqualTo(expected);
      perLayout.merge(layout, 1, Integer::sum);
    }
    assertThat(perLayout.keySet()).containsExactlyInAnyOrder(Layout.values());
    assertThat(perLayout.values()).allSatisfy(n -> assertThat(n).isGreaterThanOrEqualTo(17));
  }

  private Map<String, Long> compileAndRun() throws IOException, InterruptedException {
    String output = run(compile("layout_dump.c").toString());
    Map<String, Long> values = new LinkedHashMap<>();
    for (String line : output.strip().lines().toList()) {
      int space = line.indexOf(' ');
      assertThat(space).as(line).isPositive();
      values.put(line.substring(0, space), Long.parseLong(line.substring(space + 1)));
    }
    return values;
  }

  /** Compiles {@code src/test/c/<name>} against libvgpu's include directory; skips without gcc. */
  private Path compile(String name) throws IOException, InterruptedException {
    Path source = Path.of("src/test/c", name).toAbsolutePath();
    Path include = Path.of("../libvgpu/include").toAbsolutePath().normalize();
    assertThat(source).exists();
    assertThat(include.resolve("vgpu/vgpu_region.h")).exists();
    Path binary = dir.resolve(name.replace(".c", ""));
    Process gcc;
    try {
      gcc =
          new ProcessBuilder(
                  "gcc",
                  "-std=c11",
                  "-Wall",
                  "-Wextra",
                  "-Werror",
                  "-I",
                  include.toString(),
                  "-o",
                  binary.toString(),
                  source.toString())
              .redirectErrorStream(true)
              .start();
    } catch (IOException e) {
      assumeTrue(false, "gcc is not on the PATH; the C/Java layout comparison is skipped: " + e);
      throw e;
    }
    String gccOutput = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(gcc.waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(gcc.exitValue()).as("gcc output: %s", gccOutput).isZero();
    return binary;
  }

  private static String run(String... command) throws IOException, InterruptedException {
    Process run = new ProcessBuilder(command).redirectErrorStream(true).start();
    String output = new String(run.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(run.waitFor(30, TimeUnit.SECONDS)).isTrue();
    assertThat(run.exitValue()).as(output).isZero();
    return output;
  }

  /** The same names as layout_dump.c prints, from the codec's own constants. */
  private static Map<String, Long> javaLayout() {
    Geometry g = Geometry.of(Layout.V1_2);
    Map<String, Long> m = new LinkedHashMap<>();
    m.put("sizeof.vgpu_device_memory_t", (long) g.usedStride);
    m.put("offsetof.vgpu_device_memory_t.context_size", (long) Geometry.MEM_CONTEXT);
    m.put("offsetof.vgpu_device_memory_t.module_size", (long) Geometry.MEM_MODULE);
    m.put("offsetof.vgpu_device_memory_t.data_size", (long) Geometry.MEM_DATA);
    m.put("offsetof.vgpu_device_memory_t.offset", (long) Geometry.MEM_OFFSET);
    m.put("offsetof.vgpu_device_memory_t.total", (long) Geometry.MEM_TOTAL);
    m.put("sizeof.vgpu_device_util_t", (long) g.deviceUtilStride);
    m.put("offsetof.vgpu_device_util_t.dec_util", (long) Geometry.UTIL_DEC);
    m.put("offsetof.vgpu_device_util_t.enc_util", (long) Geometry.UTIL_ENC);
    m.put("offsetof.vgpu_device_util_t.sm_util", (long) Geometry.UTIL_SM);
    m.put("sizeof.vgpu_proc_slot_t", (long) g.slotSize);
    m.put("offsetof.vgpu_proc_slot_t.pid", (long) Geometry.SLOT_PID);
    m.put("offsetof.vgpu_proc_slot_t.hostpid", (long) Geometry.SLOT_HOSTPID);
    m.put("offsetof.vgpu_proc_slot_t.used", (long) g.slotUsedOffset);
    m.put("offsetof.vgpu_proc_slot_t.monitorused", (long) g.slotMonitorUsedOffset);
    m.put("offsetof.vgpu_proc_slot_t.device_util", (long) g.slotDeviceUtilOffset);
    m.put("offsetof.vgpu_proc_slot_t.status", (long) g.slotStatusOffset);
    m.put("offsetof.vgpu_proc_slot_t.seqlock", (long) g.slotSeqlockOffset);
    m.put("sizeof.vgpu_region_t", Layout.V1_2.structSize());
    m.put("offsetof.vgpu_region_t.initialized_flag", 0L);
    m.put("offsetof.vgpu_region_t.major_version", (long) g.majorOffset);
    m.put("offsetof.vgpu_region_t.minor_version", (long) g.minorOffset);
    m.put("offsetof.vgpu_region_t.sm_init_flag", (long) g.smInitFlagOffset);
    m.put("offsetof.vgpu_region_t.owner_pid", (long) g.ownerPidOffset);
    m.put("offsetof.vgpu_region_t.sem", (long) g.semOffset);
    m.put("offsetof.vgpu_region_t.device_num", (long) g.deviceNumOffset);
    m.put("offsetof.vgpu_region_t.uuids", (long) g.uuidsOffset);
    m.put("offsetof.vgpu_region_t.limit", (long) g.limitOffset);
    m.put("offsetof.vgpu_region_t.sm_limit", (long) g.smLimitOffset);
    m.put("offsetof.vgpu_region_t.procs", (long) g.procsOffset);
    m.put("offsetof.vgpu_region_t.proc_num", (long) g.procNumOffset);
    m.put("offsetof.vgpu_region_t.utilization_switch", (long) g.utilizationSwitchOffset);
    m.put("offsetof.vgpu_region_t.recent_kernel", (long) g.recentKernelOffset);
    m.put("offsetof.vgpu_region_t.priority", (long) g.priorityOffset);
    m.put("offsetof.vgpu_region_t.last_kernel_time", (long) g.lastKernelTimeOffset);
    m.put("offsetof.vgpu_region_t.sem_postinit", (long) g.semPostinitOffset);
    m.put("sizeof.vgpu_ext_device_t", (long) Extension.DEVICE_SIZE);
    m.put("offsetof.vgpu_ext_device_t.oom_rejections", (long) Extension.D_OOM_REJECTIONS);
    m.put("offsetof.vgpu_ext_device_t.oom_rejected_bytes", (long) Extension.D_OOM_REJECTED_BYTES);
    m.put("offsetof.vgpu_ext_device_t.throttled_ns", (long) Extension.D_THROTTLED_NS);
    m.put("offsetof.vgpu_ext_device_t.launches_delayed", (long) Extension.D_LAUNCHES_DELAYED);
    m.put("offsetof.vgpu_ext_device_t.launches_total", (long) Extension.D_LAUNCHES_TOTAL);
    m.put("offsetof.vgpu_ext_device_t.busy_ns", (long) Extension.D_BUSY_NS);
    m.put("offsetof.vgpu_ext_device_t.limiter_window_ppm", (long) Extension.D_LIMITER_WINDOW_PPM);
    m.put("sizeof.vgpu_ext_slot_t", (long) Extension.SLOT_SIZE);
    m.put("offsetof.vgpu_ext_slot_t.start_time_ticks", (long) Extension.S_START_TIME_TICKS);
    m.put("offsetof.vgpu_ext_slot_t.heartbeat_ns", (long) Extension.S_HEARTBEAT_NS);
    m.put("offsetof.vgpu_ext_slot_t.hostpid_source", (long) Extension.S_HOSTPID_SOURCE);
    m.put("offsetof.vgpu_ext_slot_t.pid", (long) Extension.S_PID_TAG);
    m.put("sizeof.vgpu_region_ext_t", (long) Extension.SIZE);
    m.put("offsetof.vgpu_region_ext_t.magic", (long) Extension.F_MAGIC);
    m.put("offsetof.vgpu_region_ext_t.major", (long) Extension.F_MAJOR);
    m.put("offsetof.vgpu_region_ext_t.minor", (long) Extension.F_MINOR);
    m.put("offsetof.vgpu_region_ext_t.size", (long) Extension.F_SIZE);
    m.put("offsetof.vgpu_region_ext_t.flags", (long) Extension.F_FLAGS);
    m.put("offsetof.vgpu_region_ext_t.generation", (long) Extension.F_GENERATION);
    m.put("offsetof.vgpu_region_ext_t.created_ns", (long) Extension.F_CREATED_NS);
    m.put("offsetof.vgpu_region_ext_t.lib_version", (long) Extension.F_LIB_VERSION);
    m.put("offsetof.vgpu_region_ext_t.pod_uid", (long) Extension.F_POD_UID);
    m.put("offsetof.vgpu_region_ext_t.container_name", (long) Extension.F_CONTAINER_NAME);
    m.put(
        "offsetof.vgpu_region_ext_t.lock_holder_since_ns", (long) Extension.F_LOCK_HOLDER_SINCE_NS);
    m.put("offsetof.vgpu_region_ext_t.lock_holder_pid", (long) Extension.F_LOCK_HOLDER_PID);
    m.put("offsetof.vgpu_region_ext_t.devices", (long) Extension.F_DEVICES);
    m.put("offsetof.vgpu_region_ext_t.slots", (long) Extension.F_SLOTS);
    m.put("const.VGPU_REGION_MAGIC", (long) Geometry.MAGIC);
    m.put("const.VGPU_REGION_MAJOR", 1L);
    m.put("const.VGPU_REGION_MINOR", 2L);
    m.put("const.VGPU_MAX_DEVICES", (long) RegionFile.MAX_DEVICES);
    m.put("const.VGPU_MAX_PROCS", (long) RegionFile.MAX_PROCESSES);
    m.put("const.VGPU_UUID_LEN", (long) Geometry.UUID_LEN);
    m.put("const.VGPU_EXT_OFFSET", Extension.OFFSET);
    m.put("const.VGPU_EXT_MAGIC", Integer.toUnsignedLong(Extension.MAGIC));
    m.put("const.VGPU_EXT_MAJOR", (long) Extension.MAJOR);
    m.put("const.VGPU_LIB_VERSION_LEN", (long) Extension.LIB_VERSION_LEN);
    m.put("const.VGPU_POD_UID_LEN", (long) Extension.POD_UID_LEN);
    m.put("const.VGPU_CONTAINER_NAME_LEN", (long) Extension.CONTAINER_NAME_LEN);
    m.put("const.VGPU_REGION_FILE_SIZE", Extension.FILE_SIZE);
    return m;
  }
}
