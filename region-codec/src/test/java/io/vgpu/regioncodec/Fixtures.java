package io.vgpu.regioncodec;

import io.vgpu.regioncodec.RegionSpec.SlotSpec;
import io.vgpu.regioncodec.internal.Extension;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * Region specs used across tests and the expected snapshot of a spec, computed from the reader
 * protocol's rules (not by reading bytes), so round-trip tests compare two independent paths.
 */
final class Fixtures {
  private Fixtures() {}

  static final long GIB = 1L << 30;

  /** Two devices, three live processes (one suspended), one free slot between them. */
  static RegionSpec typical(Layout layout) {
    boolean util = layout != Layout.L0A;
    return RegionSpec.builder(layout)
        .ownerPid(0)
        .device("GPU-11111111-2222-3333-4444-555555555555", 8 * GIB, 50)
        .device("GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", 4 * GIB, 0)
        .utilizationSwitch(1)
        .recentKernel(2)
        .priority(1)
        .lastKernelTime(1_790_000_000L)
        .slot(
            101,
            4101,
            ProcessSlot.STATUS_RUNNING,
            new DeviceUsage(0, 300, 0, 700, 1000, 1100, util ? 35 : 0),
            new DeviceUsage(1, 10, 0, 20, 30, 0, util ? 5 : 0))
        .slot(0, 0, 0)
        .slot(102, 4102, ProcessSlot.STATUS_SUSPENDED, DeviceUsage.ofMemory(0, 100, 0, 400))
        .slot(103, 0, ProcessSlot.STATUS_RUNNING, DeviceUsage.ofMemory(1, 1, 2, 3))
        .build();
  }

  /** A v1.2 region with libvgpu's extension block. */
  static RegionSpec withExtension() {
    RegionSpec base = typical(Layout.V1_2);
    List<SlotSpec> slots = new ArrayList<>();
    int i = 0;
    for (SlotSpec slot : base.slots()) {
      slots.add(slot.withExtension(new SlotExtension(1000L + i, 2000L + i, i % 4)));
      i++;
    }
    RegionExtension extension =
        new RegionExtension(
            1,
            0,
            42,
            1_790_000_000_000_000_000L,
            "libvgpu 0.1.0",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0",
            "trainer",
            0,
            0,
            List.of(
                new ExtensionDevice(0, 3, 3 * GIB, 5_000_000, 7, 1000, 9_000_000, 450_000),
                ExtensionDevice.zero(1)));
    return new RegionSpec(
        base.layout(),
        base.majorVersion(),
        base.minorVersion(),
        base.ownerPid(),
        base.smInitFlag(),
        base.deviceNum(),
        base.devices(),
        base.procNum(),
        base.utilizationSwitch(),
        base.recentKernel(),
        base.priority(),
        base.lastKernelTimeEpochSeconds(),
        slots,
        Optional.of(extension),
        Extension.FILE_SIZE);
  }

  /** {@code live} running processes, each using every one of {@code devices} devices. */
  static RegionSpec busy(Layout layout, int devices, int live) {
    RegionSpec.Builder builder = RegionSpec.builder(layout);
    for (int d = 0; d < devices; d++) {
      builder.device("GPU-%08d-0000-0000-0000-000000000000".formatted(d), 16 * GIB, 0);
    }
    for (int p = 0; p < live; p++) {
      DeviceUsage[] usage = new DeviceUsage[devices];
      for (int d = 0; d < devices; d++) {
        usage[d] =
            new DeviceUsage(
                d,
                1000L * p,
                0,
                5000L * d,
                1000L * p + 5000L * d,
                77,
                layout == Layout.L0A ? 0 : d);
      }
      builder.slot(1000 + p, 50_000 + p, ProcessSlot.STATUS_RUNNING, usage);
    }
    return builder.build();
  }

  /** What a snapshot of a file written from {@code spec} must contain (tornRetries aside). */
  static RegionSnapshot expected(RegionSpec spec, int tornRetries) {
    Layout layout = spec.layout();
    long rawDevices = spec.deviceNum();
    int deviceCount = rawDevices < 0 || rawDevices > 16 ? 16 : (int) rawDevices;
    List<DeviceHeader> devices = new ArrayList<>();
    for (int d = 0; d < deviceCount; d++) {
      if (d < spec.devices().size()) {
        RegionSpec.DeviceSpec device = spec.devices().get(d);
        devices.add(
            new DeviceHeader(
                d,
                device.uuid(),
                saturate(device.memoryLimitBytes()),
                Math.max(0, device.smLimitPercent())));
      } else {
        devices.add(new DeviceHeader(d, "", 0, 0));
      }
    }
    boolean extension = spec.extension().isPresent();
    boolean seqlocked = layout == Layout.V1_2 || layout == Layout.V1_1_BROKEN;
    int slotCount = Math.max(0, Math.min(spec.procNum(), 1024));
    List<ProcessSlot> processes = new ArrayList<>();
    Set<Integer> seen = new HashSet<>();
    // An odd generation is a compaction in progress that never ends: both passes are unsettled.
    boolean bestEffort = spec.extension().map(e -> (e.generation() & 1) != 0).orElse(false);
    for (int i = 0; i < Math.min(slotCount, spec.slots().size()); i++) {
      SlotSpec slot = spec.slots().get(i);
      if (slot.pid() == 0 || slot.status() == 0) {
        continue;
      }
      if (seqlocked && (slot.seqlock() & 1) != 0) {
        bestEffort = true;
      }
      if (!seen.add(slot.pid())) {
        continue;
      }
      List<DeviceUsage> usage = new ArrayList<>();
      for (int d = 0; d < deviceCount; d++) {
        DeviceUsage u = DeviceUsage.zero(d);
        for (DeviceUsage given : slot.usage()) {
          if (given.deviceIndex() == d) {
            u = given;
          }
        }
        usage.add(u);
      }
      Optional<SlotExtension> slotExtension =
          extension ? Optional.of(slot.extension().orElse(SlotExtension.EMPTY)) : Optional.empty();
      processes.add(
          new ProcessSlot(i, slot.pid(), slot.hostPid(), slot.status(), usage, slotExtension));
    }
    Optional<RegionExtension> regionExtension =
        spec.extension()
            .map(
                e -> {
                  List<ExtensionDevice> extDevices = new ArrayList<>();
                  for (int d = 0; d < deviceCount; d++) {
                    extDevices.add(
                        d < e.devices().size() ? e.devices().get(d) : ExtensionDevice.zero(d));
                  }
                  return new RegionExtension(
                      e.major(),
                      e.minor(),
                      e.generation(),
                      e.createdNanos(),
                      e.libVersion(),
                      e.podUid(),
                      e.containerName(),
                      e.lockHolderPid(),
                      e.lockHolderSinceNanos(),
                      extDevices);
                });
    boolean versions = layout.hasVersionFields();
    return new RegionSnapshot(
        layout,
        versions ? spec.majorVersion() : 0,
        versions ? spec.minorVersion() : 0,
        saturate(spec.ownerPid()),
        deviceCount,
        devices,
        spec.procNum(),
        spec.utilizationSwitch(),
        spec.recentKernel(),
        spec.priority(),
        layout == Layout.L0A || layout == Layout.L0B
            ? 0
            : saturate(spec.lastKernelTimeEpochSeconds()),
        processes,
        bestEffort,
        tornRetries,
        regionExtension);
  }

  /**
   * The spec a snapshot describes, for canonical files (every slot live with a unique pid and an
   * even seqlock zero, {@code device_num <= 16}, {@code proc_num} = slot count): writing it must
   * reproduce the original bytes exactly.
   */
  static RegionSpec specOf(RegionSnapshot snapshot, long fileSize) {
    RegionSpec.Builder builder =
        RegionSpec.builder(snapshot.layout())
            .ownerPid(snapshot.ownerPid())
            .utilizationSwitch(snapshot.utilizationSwitch())
            .recentKernel(snapshot.recentKernel())
            .priority(snapshot.priority())
            .lastKernelTime(snapshot.lastKernelTimeEpochSeconds())
            .procNum(snapshot.rawProcNum())
            .fileSize(fileSize);
    if (snapshot.layout().hasVersionFields()) {
      builder.version(snapshot.majorVersion(), snapshot.minorVersion());
    }
    for (DeviceHeader device : snapshot.devices()) {
      builder.device(device.uuid(), device.memoryLimitBytes(), device.smLimitPercent());
    }
    for (ProcessSlot slot : snapshot.processes()) {
      SlotSpec spec = SlotSpec.of(slot.pid(), slot.hostPid(), slot.status(), slot.devices());
      builder.slot(slot.extension().map(spec::withExtension).orElse(spec));
    }
    snapshot.extension().ifPresent(builder::extension);
    return builder.build();
  }

  static long saturate(long unsigned) {
    return unsigned < 0 ? Long.MAX_VALUE : unsigned;
  }

  /** {@code snapshot} with another torn-retry count, for comparisons. */
  static RegionSnapshot withTornRetries(RegionSnapshot s, int tornRetries) {
    return new RegionSnapshot(
        s.layout(),
        s.majorVersion(),
        s.minorVersion(),
        s.ownerPid(),
        s.deviceCount(),
        s.devices(),
        s.rawProcNum(),
        s.utilizationSwitch(),
        s.recentKernel(),
        s.priority(),
        s.lastKernelTimeEpochSeconds(),
        s.processes(),
        s.bestEffort(),
        tornRetries,
        s.extension());
  }
}
