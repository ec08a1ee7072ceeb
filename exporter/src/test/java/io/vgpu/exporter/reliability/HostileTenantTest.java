package io.vgpu.exporter.reliability;

import static io.vgpu.hostpid.testing.ProcEntry.libcudaMapping;
import static io.vgpu.hostpid.testing.ProcEntry.regionMapping;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.attribution.FeedbackLoop;
import io.vgpu.exporter.attribution.RegionWriteBack;
import io.vgpu.exporter.cli.Cli;
import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.node.EvidenceCollector;
import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.exporter.nvml.FakeNvml;
import io.vgpu.exporter.nvml.NvmlSnapshot;
import io.vgpu.exporter.testing.Samples;
import io.vgpu.exporter.testing.ShrregTool;
import io.vgpu.hostpid.ProcFs;
import io.vgpu.hostpid.testing.ProcEntry;
import io.vgpu.hostpid.testing.ProcTree;
import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import io.vgpu.regioncodec.RegionSpec;
import io.vgpu.regioncodec.RegionWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 18's attacks, each as a tenant would run it against the real exporter or the real operator
 * commands: what a pod controls (its cache directory, its container's files under {@code
 * /proc/<pid>/root}, its region's fields) is planted, then the exporter's answer is checked. The
 * node's procfs is a tree formatted as Linux formats it (processes in kubepods cgroups, nested pid
 * namespaces), the files in it are real: real symbolic links, FIFOs swapped in by rename, hard
 * links. NVML is the fake driver library.
 */
class HostileTenantTest {
  static final String VICTIM_UID = "aaaaaaaa-1111-4111-8111-aaaaaaaaaaaa";
  static final String EVIL_UID = "eeeeeeee-2222-4222-8222-eeeeeeeeeeee";
  static final String GPU_V = "GPU-76767676-0000-4000-8000-000000000001";
  static final String GPU_E = "GPU-65656565-0000-4000-8000-000000000002";
  static final String SECRET = "root:$6$topsecrethash:19000:0:99999:7:::";
  static final long GIB = 1L << 30;

  @TempDir Path dir;
  private LiveExporter ex;

  @AfterEach
  void tearDown() throws Exception {
    if (ex != null) {
      // Bounded: on the pre-fix code a request thread can stay blocked in open(2) on a FIFO that
      // was renamed away (nobody can open it for writing any more), and close() would wait on it.
      LiveExporter e = ex;
      Thread closer = Thread.ofPlatform().daemon().start(e::close);
      closer.join(10_000);
    }
  }

  // ---- a procfs tree ----

  /** One process as /proc shows it: pod cgroup, NSpid chain, maps, and its container root. */
  static Path process(
      Path proc, int hostPid, int containerPid, String podUid, List<String> maps, int uid) {
    ProcEntry p =
        ProcEntry.in(ProcTree.at(proc), hostPid, containerPid)
            .pod(podUid)
            .container("c".repeat(64))
            .uid(uid)
            .withMaps()
            .withEnviron()
            .withContainerRoot();
    p.maps.addAll(maps);
    return p.write();
  }

  private record Result(int code, String out, String err) {}

  private static Result cli(String... args) throws Exception {
    return CompletableFuture.supplyAsync(
            () -> {
              StringWriter out = new StringWriter();
              StringWriter err = new StringWriter();
              int code = Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
              return new Result(code, out.toString(), err.toString());
            })
        .get(60, TimeUnit.SECONDS);
  }

  private static RegionSpec.Builder v12(String uuid) {
    return RegionSpec.builder(Layout.V1_2).device(uuid, 8 * GIB, 50);
  }

  private static DeviceUsage usage(long bytes) {
    return new DeviceUsage(0, bytes / 4, 0, bytes - bytes / 4, bytes, bytes, 0);
  }

  private static RegionSnapshot read(Path region) {
    try (RegionFile f = RegionFile.openReadOnly(region)) {
      return f.snapshot();
    }
  }

  // ---- item 1: /etc/ld.so.preload linked to a host secret ----

  @Test
  void preload_absoluteSymlinkToAHostSecret_neverShownOnThePageOrInDoctor() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    Path proc = Files.createDirectories(dir.resolve("proc"));
    Path secret = Files.writeString(dir.resolve("shadow"), SECRET + "\n");
    Path evilDir = Files.createDirectories(root.resolve(EVIL_UID + "_main"));
    RegionWriter.create(evilDir.resolve("a.cache"), v12(GPU_E).build());
    Path p = process(proc, 6101, 1, EVIL_UID, List.of(libcudaMapping()), 0);
    // What the tenant does inside its container: ln -sf /etc/shadow /etc/ld.so.preload. The
    // target is absolute, so a reader that follows it from the host resolves it on the host.
    Files.createSymbolicLink(p.resolve("root/etc/ld.so.preload"), secret);

    Result doctor =
        cli(
            "doctor",
            "--no-nvml",
            "--window",
            "0s",
            "--cache-root",
            root.toString(),
            "--proc-root",
            proc.toString());
    assertThat(doctor.out()).contains("library-not-loaded").doesNotContain("topsecrethash");
    assertThat(doctor.out()).contains("ld.so.preload is not a readable regular file");

    Map<String, String> flags = new HashMap<>();
    flags.put("path.procfs", proc.toString());
    ex = LiveExporter.start(root, flags);
    ex.awaitPass();
    HttpResponse<String> page = ex.get("/");
    assertThat(page.statusCode()).isEqualTo(200);
    assertThat(page.body()).doesNotContain("topsecrethash");
    HttpResponse<String> api = ex.get("/api/v1/containers");
    assertThat(api.body()).doesNotContain("topsecrethash");
  }

  // ---- item 2: ld.so.preload flipped between a file and a FIFO while / is requested ----

  @Test
  void preload_flippedWithAFifoUnderLoad_requestsAndHealthNeverBlock() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    Path proc = Files.createDirectories(dir.resolve("proc"));
    Path evilDir = Files.createDirectories(root.resolve(EVIL_UID + "_main"));
    RegionWriter.create(evilDir.resolve("a.cache"), v12(GPU_E).build());
    List<Path> etcs = new ArrayList<>();
    for (int i = 0; i < 12; i++) {
      etcs.add(
          process(proc, 6201 + i, 1 + i, EVIL_UID, List.of(libcudaMapping()), 0)
              .resolve("root/etc"));
    }
    Map<String, String> flags = new HashMap<>();
    flags.put("path.procfs", proc.toString());
    ex = LiveExporter.start(root, flags);
    ex.awaitPass();

    List<Path> preloads = etcs.stream().map(e -> e.resolve("ld.so.preload")).toList();
    ExecutorService clients = Executors.newFixedThreadPool(6);
    try (FifoFlipper flipper =
        new FifoFlipper(preloads, "/usr/local/vgpu/libvgpu.so\n".getBytes(UTF_8))) {
      List<Future<Integer>> pages = new ArrayList<>();
      long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(4);
      for (int c = 0; c < 6; c++) {
        pages.add(
            clients.submit(
                () -> {
                  int served = 0;
                  while (System.nanoTime() < end) {
                    if (ex.get("/").statusCode() == 200) {
                      served++;
                    }
                  }
                  return served;
                }));
      }
      int served = 0;
      for (Future<Integer> f : pages) {
        // A request thread stuck in open(2) on the FIFO would never return.
        served += f.get(30, TimeUnit.SECONDS);
      }
      long t0 = System.nanoTime();
      assertThat(ex.get("/healthz").statusCode()).isEqualTo(200);
      assertThat(ex.get("/metrics").statusCode()).isEqualTo(200);
      assertThat(Duration.ofNanos(System.nanoTime() - t0)).isLessThan(Duration.ofSeconds(3));
      System.out.printf(
          "reliability: preload FIFO flips: %d status pages served during %d flips%n",
          served, flipper.flips());
      assertThat(flipper.flips()).isGreaterThan(20);
    } finally {
      clients.shutdownNow();
    }
  }

  // ---- item 3: a forged region blocking another pod's GPU ----

  @Test
  void feedback_forgedRegionClaimingTheVictimsGpu_neverBlocksTheVictim() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    Path proc = Files.createDirectories(dir.resolve("proc"));
    // The victim: a live process of its pod on GPU_V, active (recent_kernel 2), priority 1.
    Path victimDir = Files.createDirectories(root.resolve(VICTIM_UID + "_train"));
    Path victim = victimDir.resolve("a.cache");
    RegionWriter.create(
        victim, v12(GPU_V).priority(1).recentKernel(2).slot(1, 1, 1, usage(GIB)).build());
    process(proc, 7001, 1, VICTIM_UID, List.of(libcudaMapping(), regionMapping(victim)), 0);
    // Attacker 1: a region of no process at all, priority 0, recent_kernel 2^31-1, victim's uuid.
    Path forgedDir = Files.createDirectories(root.resolve(EVIL_UID + "_forged"));
    Path forged = forgedDir.resolve("a.cache");
    RegionWriter.create(forged, v12(GPU_V).priority(0).recentKernel(Integer.MAX_VALUE).build());
    // Attacker 2: a live process of its own pod, but running on GPU_E; its region claims GPU_V
    // with priority -2^31.
    String evil2 = "eeeeeeee-3333-4333-8333-eeeeeeeeeeee";
    Path claimDir = Files.createDirectories(root.resolve(evil2 + "_claim"));
    Path claim = claimDir.resolve("a.cache");
    RegionWriter.create(
        claim,
        v12(GPU_V)
            .priority(Integer.MIN_VALUE)
            .recentKernel(Integer.MAX_VALUE)
            .slot(1, 1, 1, usage(GIB))
            .build());
    process(proc, 7002, 1, evil2, List.of(libcudaMapping(), regionMapping(claim)), 0);

    FakeNvml fake = FakeNvml.in(Files.createDirectories(dir.resolve("nvml")));
    fake.write(
        "device 0 uuid="
            + GPU_V
            + " name=NVIDIA_H100 total="
            + 80 * GIB
            + " used="
            + GIB
            + " util=50 memutil=3",
        "device 1 uuid="
            + GPU_E
            + " name=NVIDIA_H100 total="
            + 80 * GIB
            + " used="
            + GIB
            + " util=50 memutil=3",
        "process 0 pid=7001 used=" + GIB,
        "process 1 pid=7002 used=" + GIB);
    Map<String, String> flags = new HashMap<>();
    flags.put("path.procfs", proc.toString());
    flags.put("nvml", "true");
    flags.put("nvml.library", FakeNvml.library().toString());
    flags.put("nvml.sample-interval", "100ms");
    flags.put("attribution.feedback", "true");
    flags.put("collectors.disabled", "");
    ex = LiveExporter.start(root, flags);

    // Wait for a feedback pass that wrote both regions (the victim decays 2 -> 1 without libvgpu
    // running; the claiming region is written back within range). One pass writes them one after
    // the other, so waiting for the victim alone read the claim mid-pass under load.
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    int victimRk = read(victim).recentKernel();
    while (System.nanoTime() < deadline
        && (victimRk == 2 || read(claim).recentKernel() == Integer.MAX_VALUE)) {
      Thread.sleep(20);
      victimRk = read(victim).recentKernel();
    }
    // Before the fix the same pass wrote -1 here: blocked by a region of no live process (and, had
    // that been skipped, by the claiming region whose process runs on another GPU).
    assertThat(victimRk).as("victim's recent_kernel after a feedback pass").isEqualTo(1);
    // The forged region of no process was left alone entirely; the claiming one was read within
    // range and written back within range.
    assertThat(read(forged).recentKernel()).isEqualTo(Integer.MAX_VALUE);
    assertThat(read(claim).recentKernel()).isBetween(-1, 2);
    Samples s = ex.scrape();
    assertThat(s.value("vgpu_exporter_region_writes_total", "field", "recent_kernel"))
        .isGreaterThanOrEqualTo(2);
  }

  // ---- item 4: cleanup --apply after the judged file was swapped ----

  private static RepairPlan judgeCleanup(Path root, Path proc) {
    NodeEvidence evidence =
        new EvidenceCollector(
                new ProcFs(proc),
                () -> NvmlSnapshot.unavailable(java.time.Instant.now(), "not in this test"),
                java.util.Optional::empty,
                java.time.InstantSource.system(),
                Duration.ZERO,
                d -> {},
                NodeEvidence.Thresholds.defaults())
            .collect(List.of(root));
    return RepairPlan.cleanup(evidence);
  }

  @Test
  void cleanup_fileSwappedBetweenVerdictAndApply_toolChangesNothingAndSaysWhy() throws Exception {
    Path tool = ShrregTool.path();
    Path root = Files.createDirectories(dir.resolve("containers"));
    Path proc = Files.createDirectories(dir.resolve("proc"));
    Path evilDir = Files.createDirectories(root.resolve(EVIL_UID + "_main"));
    // The tenant's own region has a dead slot (pid 8, no such process): cleanup would free it.
    Path own = evilDir.resolve("a.cache");
    RegionWriter.create(own, v12(GPU_E).slot(8, 8, 1, usage(GIB)).build());
    process(proc, 8001, 1, EVIL_UID, List.of(libcudaMapping(), regionMapping(own)), 0);
    // The victim's region, elsewhere on the node, whose slot 8 carries the same guard.
    Path victim = Files.createDirectories(dir.resolve("other")).resolve("v.cache");
    RegionWriter.create(victim, v12(GPU_V).slot(8, 8, 1, usage(3 * GIB)).build());

    // The command judges, then runs shrreg-tool on the path; the tenant wins the race in between
    // by swapping its file for a link to the victim's region (the judged file kept alive aside,
    // so its inode number cannot be reused by what takes its place).
    RepairPlan plan = judgeCleanup(root, proc);
    assertThat(plan.actions()).hasSize(1);
    Path aside = Files.createDirectories(dir.resolve("aside"));
    Files.move(own, aside.resolve("judged.cache"));
    Files.createSymbolicLink(own, victim);
    var outcomes = plan.apply(tool);
    assertThat(outcomes).hasSize(1);
    assertThat(outcomes.getFirst().exitCode())
        .as("%s -> %s", outcomes.getFirst().action().toolArgs(), outcomes.getFirst().output())
        .isEqualTo(RepairPlan.WRONG_FILE_EXIT);
    assertThat(outcomes.getFirst().meaning()).contains("no longer names the file that was judged");
    assertThat(read(victim).processes()).as("victim's slots").hasSize(1);

    // A plain rename of another regular file over the path: same answer.
    Files.delete(own);
    Path copy = evilDir.resolve("b.tmp");
    RegionWriter.create(copy, v12(GPU_E).slot(8, 8, 1, usage(GIB)).build());
    Files.move(copy, own, StandardCopyOption.ATOMIC_MOVE);
    var second = plan.apply(tool);
    assertThat(second.getFirst().exitCode())
        .as(second.getFirst().output())
        .isEqualTo(RepairPlan.WRONG_FILE_EXIT);
    assertThat(read(own).processes()).hasSize(1);
  }

  // ---- item 9: write-back through a hard link ----

  @Test
  void writeBack_regionHardLinkedToAnotherFile_refusedAndTheOtherFileUnchanged() throws Exception {
    Path victim = Files.createDirectories(dir.resolve("other")).resolve("v.cache");
    RegionWriter.create(victim, v12(GPU_V).recentKernel(2).build());
    Path evilDir = Files.createDirectories(dir.resolve("containers/" + EVIL_UID + "_main"));
    Path linked = Files.createLink(evilDir.resolve("a.cache"), victim);
    try (RegionWriteBack wb = new RegionWriteBack()) {
      boolean ok =
          wb.apply(
              new FeedbackLoop.Decision(linked, OptionalInt.of(-1), OptionalInt.of(1), true),
              "feedback");
      assertThat(ok).isFalse();
      assertThat(wb.failing()).containsEntry(linked, "hard_link");
      assertThat(wb.writeErrors()).containsEntry("hard_link", 1L);
    }
    assertThat(read(victim).recentKernel()).isEqualTo(2);
  }

  @Test
  void writeBack_regionOfAnotherUser_refusedAsWrongOwner() throws Exception {
    Path region = Files.createDirectories(dir.resolve("c")).resolve("a.cache");
    RegionWriter.create(region, v12(GPU_V).recentKernel(2).build());
    try (RegionWriteBack wb = new RegionWriteBack()) {
      boolean ok =
          wb.apply(
              new FeedbackLoop.Decision(region, OptionalInt.of(1), OptionalInt.empty(), false),
              "feedback",
              java.util.Set.of(4242));
      assertThat(ok).isFalse();
      assertThat(wb.failing()).containsEntry(region, "wrong_owner");
    }
    assertThat(read(region).recentKernel()).isEqualTo(2);
  }

  // ---- item 10: terminal escapes in tenant text ----

  @Test
  void doctorAndInspect_tenantNamesWithEscapesAndBidi_printedWithoutThem() throws Exception {
    Path root = Files.createDirectories(dir.resolve("containers"));
    Path proc = Files.createDirectories(dir.resolve("proc"));
    String hostile = "x\u001b[2J\u001b]0;owned\u0007\u009b31m\u202etxt.exe";
    Path evilDir = Files.createDirectories(root.resolve(EVIL_UID + "_main"));
    RegionWriter.create(evilDir.resolve(hostile + ".cache"), v12(GPU_E + hostile).build());
    Files.writeString(evilDir.resolve("junk\u001b[31m.cache"), "not a region");
    for (String cmd : List.of("doctor", "inspect", "cleanup")) {
      List<String> args = new ArrayList<>(List.of(cmd));
      if (cmd.equals("doctor")) {
        args.addAll(List.of("--no-nvml", "--window", "0s"));
      }
      args.addAll(List.of("--cache-root", root.toString(), "--proc-root", proc.toString()));
      Result r = cli(args.toArray(String[]::new));
      String all = r.out() + r.err();
      assertThat(all).as(cmd).contains(EVIL_UID);
      for (char c : new char[] {'\u001b', '\u0007', '\u009b', '\u202e'}) {
        assertThat(all.indexOf(c)).as("%s prints U+%04X", cmd, (int) c).isEqualTo(-1);
      }
    }
  }
}
