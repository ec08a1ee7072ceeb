package io.vgpu.exporter.reliability;

import static io.vgpu.exporter.reliability.LiveExporter.assertHealthyNeighbour;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.attribution.FeedbackLoop;
import io.vgpu.exporter.attribution.RegionWriteBack;
import io.vgpu.exporter.cli.Cli;
import io.vgpu.exporter.cli.LogSetup;
import io.vgpu.exporter.discovery.MappedRegion;
import io.vgpu.exporter.testing.Await;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.TestRegions;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionException;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Map;
import java.util.OptionalInt;

/**
 * The disk-full scenarios of {@link DiskFullTest}, run as the main class of a child JVM inside a
 * private mount namespace whose {@code args[1]} is a small filesystem of its own (the test mounts
 * it; nothing leaks to the host). Every step asserts; an {@link AssertionError} exits non-zero. The
 * JVM getting to "PASS" is itself the first result: a mapped access that faulted without being
 * caught would kill the thread or the VM.
 *
 * <ul>
 *   <li>{@code read} (tmpfs): a tenant's region created sparse, the filesystem filled, then the
 *       exporter started: on tmpfs even a load from a hole needs a page, so the tenant's reads
 *       fault. Scrapes, readiness and the healthy neighbour must be unaffected, the fault counted
 *       as {@code parse_errors{reason="io_error"}}, the operator CLI (inspect, doctor, cleanup
 *       --apply) must finish; after the filler is deleted the tenant is read again.
 *   <li>{@code write} (ext4, where a hole reads as zeros and only a store needs a block): two
 *       active containers and a sparse idle one share a GPU (the active ones with a live process of
 *       their pod on that GPU per the fake NVML). The idle one's last page is a hole, so it reads
 *       as a region of no process: the live exporter's feedback loop leaves it alone (it used to
 *       set its {@code utilization_switch} and fault). The write-back's own fault handling is then
 *       driven directly on that full ext4: a store into the hole faults, is caught and counted as
 *       {@code region_write_errors_total{reason="fault"}}; after space is freed the retry writes
 *       it.
 * </ul>
 */
public final class DiskFullNode {
  static final String SPARSE_UID = "dddddddd-0000-4000-8000-00000000000d";
  static final String SPARSE_CTR = "sparse";
  static final String ACTIVE_A = "aaaaaaaa-0000-4000-8000-00000000000a";
  static final String ACTIVE_B = "bbbbbbbb-0000-4000-8000-00000000000b";

  private DiskFullNode() {}

  public static void main(String[] args) throws Exception {
    LogSetup.configure("info", "logfmt");
    Path fs = Path.of(args[1]);
    switch (args[0]) {
      case "read" -> readScenario(fs);
      case "write" -> writeScenario(fs);
      default -> throw new IllegalArgumentException("scenario read|write, got " + args[0]);
    }
    System.out.println("disk-full: PASS " + args[0]);
    System.exit(0); // the exporter's non-daemon threads must not keep the child alive
  }

  /**
   * A region sized with ftruncate and only its non-zero 4 KiB pages written, the rest holes; with
   * {@code tailHole} the last page (v1.2 without extension: proc_num, utilization_switch,
   * recent_kernel, priority, sem_postinit) is left a hole too, as a tenant can make it (fallocate
   * --punch-hole on its own file; an initialized region otherwise holds sem_postinit = 1 there).
   */
  static Path writeSparseRegion(
      Path root, String uid, String ctr, RegionSpec spec, boolean tailHole)
      throws IOException, InterruptedException {
    Path dir = Files.createDirectories(root.resolve(uid + "_" + ctr));
    Path file = dir.resolve("a.cache");
    byte[] bytes = RegionWriter.encode(spec);
    // ftruncate as libvgpu does; not RandomAccessFile.setLength, which fallocates on Linux.
    Process t =
        new ProcessBuilder("truncate", "-s", Integer.toString(bytes.length), file.toString())
            .inheritIO()
            .start();
    if (t.waitFor() != 0) {
      throw new IOException("truncate failed for " + file);
    }
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
      int last = (bytes.length - 1) / 4096 * 4096;
      for (int off = 0; off < (tailHole ? last : bytes.length); off += 4096) {
        int len = Math.min(4096, bytes.length - off);
        for (int i = off; i < off + len; i++) {
          if (bytes[i] != 0) {
            ch.write(ByteBuffer.wrap(bytes, off, len), off);
            break;
          }
        }
      }
    }
    return file;
  }

  /** An idle tenant on GPU 0: one device, no slots, switch/kernel/priority/time all 0. */
  static RegionSpec idleSpec() {
    return RegionSpec.builder(Layout.V1_2)
        .device(TestRegions.uuid(0), 2048 * TestRegions.MIB, 50)
        .utilizationSwitch(0)
        .recentKernel(0)
        .priority(0)
        .build();
  }

  /**
   * Appends to a filler file until the filesystem says ENOSPC, syncs, and repeats until a round
   * writes nothing (ext4 gives back over-reserved delayed-allocation blocks after writeback);
   * returns the filler's size.
   */
  static long fill(Path file) throws IOException {
    long n = 0;
    byte[] chunk = new byte[4096];
    try (FileChannel ch =
        FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE)) {
      for (int round = 0; round < 20; round++) {
        long before = n;
        try {
          while (true) {
            n += ch.write(ByteBuffer.wrap(chunk), n);
          }
        } catch (IOException e) {
          if (!String.valueOf(e.getMessage()).contains("No space left")) {
            throw e;
          }
        }
        try {
          ch.force(true);
        } catch (IOException e) {
          // ENOSPC at writeback: the next round finds out what is left
        }
        if (n == before) {
          return n;
        }
      }
    }
    throw new IOException("the filesystem kept accepting writes: " + n + " bytes");
  }

  private static String readyz(LiveExporter ex) throws Exception {
    var r = ex.get("/readyz");
    assertThat(r.statusCode()).as("/readyz: %s", r.body()).isEqualTo(200);
    return r.body();
  }

  private static void readScenario(Path fs) throws Exception {
    Path root = Files.createDirectories(fs.resolve("containers"));
    LiveExporter.writeHealthy(root);
    // A fully written region outside the root, to warm the write-back path up.
    Path warm = fs.resolve("warm.cache");
    RegionWriter.create(warm, idleSpec());

    try (LiveExporter ex = LiveExporter.start(root, Map.of())) {
      ex.awaitPass();
      // An exporter that has run a while reads regions through compiled code, where the JVM
      // delivers a fault asynchronously; compile the read path first.
      MappedRegion healthy = region(ex, LiveExporter.HEALTHY_UID);
      for (int i = 0; i < 20_000; i++) {
        assertThat(healthy.read()).isInstanceOf(MappedRegion.Read.Ok.class);
      }
      Path sparse = writeSparseRegion(root, SPARSE_UID, SPARSE_CTR, idleSpec(), true);
      long filled = fill(fs.resolve("filler"));
      System.out.printf("disk-full: tmpfs filled with %d bytes%n", filled);
      ex.awaitPass();
      MappedRegion tenant = region(ex, SPARSE_UID);
      for (int i = 0; i < 1_000; i++) {
        assertThat(tenant.read())
            .isEqualTo(new MappedRegion.Read.Failed(RegionException.Reason.IO_ERROR));
      }
      int scrapes = 0;
      for (int i = 0; i < 20; i++) {
        Samples s = ex.scrape();
        scrapes++;
        assertHealthyNeighbour(s);
        assertThat(s.find("vgpu_container_memory_limit_bytes", "pod_uid", SPARSE_UID))
            .as("the faulting tenant has no series")
            .isEmpty();
      }
      double ioErrors = ex.parseErrors("io_error");
      assertThat(ioErrors).as("parse_errors{reason=io_error}, once per change").isEqualTo(1);
      assertThat(ex.parseErrors("truncated")).as("not misreported as truncated").isZero();
      readyz(ex);
      System.out.printf(
          "disk-full: read faults: 1000 direct reads + %d scrapes 200, neighbour exact,"
              + " io_error=%.0f%n",
          scrapes, ioErrors);

      // The write-back component, compiled, storing into the hole (the live chain is the write
      // scenario; on tmpfs the read before it faults first).
      try (RegionWriteBack wb = new RegionWriteBack()) {
        for (int i = 0; i < 20_000; i++) {
          assertThat(wb.apply(decision(warm, 1 + (i & 1)), "warm-up")).isTrue();
        }
        for (int i = 0; i < 100; i++) {
          assertThat(wb.apply(decision(sparse, 1), "test")).isFalse();
        }
        assertThat(wb.writeErrors()).containsEntry(RegionWriteBack.FAULT, 100L);
        assertThat(wb.writes()).containsEntry(RegionWriteBack.RECENT_KERNEL, 20_000L);
        assertThat(wb.failing()).containsOnlyKeys(sparse).containsValue(RegionWriteBack.FAULT);
        System.out.println("disk-full: write-back: 100 faulting stores caught and counted");

        String inspect = cli("inspect", "--cache-root", root.toString());
        assertThat(inspect).contains(LiveExporter.HEALTHY_UID).contains("kept its size");
        String doctor =
            cli("doctor", "--no-nvml", "--window", "0s", "--cache-root", root.toString());
        assertThat(doctor).contains(LiveExporter.HEALTHY_UID);
        String cleanup =
            cli(
                "cleanup",
                "--apply",
                "--cache-root",
                root.toString(),
                "--shrreg-tool",
                "/bin/false");
        assertThat(cleanup).contains("skipped " + sparse).contains("kept its size");
        System.out.println("disk-full: inspect, doctor, cleanup --apply finished on the full fs");

        Files.delete(fs.resolve("filler"));
        Await.until(
            Duration.ofSeconds(20),
            () ->
                !ex.scrape()
                    .find("vgpu_container_memory_limit_bytes", "pod_uid", SPARSE_UID)
                    .isEmpty());
        Samples s = ex.scrape();
        assertThat(
                s.value(
                    "vgpu_container_memory_limit_bytes",
                    "pod_uid",
                    SPARSE_UID,
                    "device_index",
                    "0"))
            .isEqualTo(2048.0 * TestRegions.MIB);
        assertHealthyNeighbour(s);
        assertThat(s.value("vgpu_exporter_parse_errors_total", "reason", "io_error")).isEqualTo(1);
        assertThat(wb.apply(decision(sparse, 1), "test")).isTrue();
        assertThat(wb.failing()).isEmpty();
        assertThat(recentKernel(sparse)).isEqualTo(1);
        System.out.println(
            "disk-full: space freed -> tenant read again, write-back stores, neighbour exact");
      }
    }
  }

  private static FeedbackLoop.Decision decision(Path region, int recentKernel) {
    return new FeedbackLoop.Decision(
        region, OptionalInt.of(recentKernel), OptionalInt.empty(), false);
  }

  private static MappedRegion region(LiveExporter ex, String uid) {
    return ex.app.discovery().current().containers().stream()
        .filter(c -> c.key().podUid().equals(uid))
        .flatMap(c -> c.files().stream())
        .flatMap(f -> f.region().stream())
        .findFirst()
        .orElseThrow(() -> new AssertionError("no mapped region for " + uid));
  }

  private static String cli(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
    // A one-shot command quiets the process's logging to WARN (its report is its output); this
    // JVM also runs the exporter, whose INFO lines the test counts.
    LogSetup.configure("info", "logfmt");
    System.out.printf("disk-full: %s exit %d%n", args[0], code);
    assertThat(code).as("%s exit; err: %s", args[0], err).isBetween(0, 2);
    assertThat(err.toString()).as("%s stderr", args[0]).doesNotContain("Exception");
    return out.toString();
  }

  private static void writeScenario(Path fs) throws Exception {
    Path root = Files.createDirectories(fs.resolve("containers"));
    RegionSpec.SlotSpec slot =
        RegionSpec.SlotSpec.of(1, 1, 1, java.util.List.of(new DeviceUsage(0, 0, 0, 0, 0, 0, 0)));
    RegionSpec active =
        RegionSpec.builder(Layout.V1_2)
            .device(TestRegions.uuid(0), 2048 * TestRegions.MIB, 50)
            .utilizationSwitch(1)
            .recentKernel(2)
            .priority(0)
            .slot(slot)
            .build();
    Path a = writeSparseRegion(root, ACTIVE_A, "a", active, false);
    Path b = writeSparseRegion(root, ACTIVE_B, "b", active, false);
    RegionSpec idle =
        RegionSpec.builder(Layout.V1_2)
            .device(TestRegions.uuid(0), 2048 * TestRegions.MIB, 50)
            .utilizationSwitch(0)
            .recentKernel(0)
            .priority(0)
            .slot(slot)
            .build();
    Path sparse = writeSparseRegion(root, SPARSE_UID, SPARSE_CTR, idle, true);
    // The feedback loop acts only on regions with a live process of their own pod on a GPU NVML
    // shows it on: one process per pod (container pid 1), all three on GPU 0.
    Path proc = Files.createTempDirectory("diskfull-proc");
    int hostPid = 9101;
    StringBuilder nvmlProcesses = new StringBuilder();
    for (String uid : new String[] {ACTIVE_A, ACTIVE_B, SPARSE_UID}) {
      HostileTenantTest.process(proc, hostPid, 1, uid, java.util.List.of(), 0);
      nvmlProcesses.append("process 0 pid=").append(hostPid).append(" used=1048576\n");
      hostPid++;
    }
    io.vgpu.exporter.nvml.FakeNvml.in(Files.createTempDirectory("diskfull-nvml"))
        .write(
            "device 0 uuid="
                + TestRegions.uuid(0)
                + " name=NVIDIA_H100 total=85899345920 used=1073741824 util=50 memutil=3",
            nvmlProcesses.toString().strip());
    long filled = fill(fs.resolve("filler"));
    System.out.printf("disk-full: ext4 filled with %d bytes%n", filled);

    Map<String, String> flags = new java.util.HashMap<>();
    flags.put("attribution.feedback", "true");
    flags.put("collectors.disabled", "");
    flags.put("path.procfs", proc.toString());
    flags.put("nvml", "true");
    flags.put("nvml.library", io.vgpu.exporter.nvml.FakeNvml.library().toString());
    flags.put("nvml.sample-interval", "100ms");
    try (LiveExporter ex = LiveExporter.start(root, flags)) {
      // The two active containers' decrements land (their pages are allocated).
      Await.until(
          Duration.ofSeconds(30),
          () ->
              ex.scrape().value("vgpu_exporter_region_writes_total", "field", "recent_kernel")
                  >= 2);
      Samples s = ex.scrape();
      assertThat(recentKernel(a)).isEqualTo(1);
      assertThat(recentKernel(b)).isEqualTo(1);
      assertThat(
              s.value(
                  "vgpu_container_memory_limit_bytes", "pod_uid", ACTIVE_A, "device_index", "0"))
          .isEqualTo(2048.0 * TestRegions.MIB);
      // The sparse tenant's page with proc_num, utilization_switch and recent_kernel is a hole:
      // it reads as proc_num 0, a region of no registered process, which the feedback loop never
      // writes (before it did, and the store faulted). Nothing is stored, nothing faults.
      assertThat(switchOf(sparse)).isZero();
      assertThat(s.value("vgpu_exporter_region_write_errors_total", "reason", "fault")).isZero();
      System.out.println("disk-full: region of no process on a full ext4: not written, no fault");
    }

    // The write-back itself, on the same full ext4: a store into the hole faults, is caught,
    // counted once and logged once; after space is freed the retry writes it.
    try (RegionWriteBack wb = new RegionWriteBack()) {
      FeedbackLoop.Decision d =
          new FeedbackLoop.Decision(sparse, OptionalInt.empty(), OptionalInt.of(1), false);
      for (int i = 0; i < 3; i++) {
        assertThat(wb.apply(d, "disk-full")).isFalse();
      }
      assertThat(wb.writeErrors()).containsEntry(RegionWriteBack.FAULT, 3L);
      assertThat(wb.failing()).containsEntry(sparse, RegionWriteBack.FAULT);
      Files.delete(fs.resolve("filler"));
      long freed = System.nanoTime();
      assertThat(wb.apply(d, "disk-full")).isTrue();
      assertThat(switchOf(sparse)).isEqualTo(1);
      assertThat(wb.failing()).isEmpty();
      System.out.printf(
          "disk-full: write fault: counted 3 (reason=\"fault\"), space freed -> switch written"
              + " %d ms later%n",
          (System.nanoTime() - freed) / 1_000_000);
    }
  }

  private static int recentKernel(Path p) {
    try (RegionFile f = RegionFile.openReadOnly(p)) {
      return f.snapshot().recentKernel();
    }
  }

  private static int switchOf(Path p) {
    try (RegionFile f = RegionFile.openReadOnly(p)) {
      return f.snapshot().utilizationSwitch();
    }
  }
}
