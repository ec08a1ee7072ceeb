package io.vgpu.exporter.cli;

import static io.vgpu.exporter.testing.OperatorFixture.GPU0;
import static io.vgpu.exporter.testing.OperatorFixture.UID_A;
import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.vgpu.exporter.testing.OperatorFixture;
import io.vgpu.exporter.testing.ShrregTool;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionExtension;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import io.vgpu.regioncodec.RegionSpec;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The node-side commands through the real CLI, on real files, with the real shrreg-tool. */
class OperatorCommandsTest {
  static final long GIB = 1L << 30;

  @TempDir Path tmp;
  OperatorFixture fx;

  @BeforeEach
  void setUp() {
    fx = new OperatorFixture(tmp);
  }

  record Result(int code, String out, String err) {}

  Result cli(String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code = Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true));
    return new Result(code, out.toString(), err.toString());
  }

  String[] node(String cmd, String... more) {
    List<String> a =
        new ArrayList<>(
            List.of(
                cmd, "--cache-root", fx.cacheRoot.toString(), "--proc-root", fx.proc.toString()));
    a.addAll(List.of(more));
    return a.toArray(String[]::new);
  }

  static Path shrregTool() throws IOException, InterruptedException {
    return ShrregTool.path();
  }

  static RegionSpec spec(Layout layout) {
    return RegionSpec.builder(layout)
        .device(GPU0, 4 * GIB, 50)
        .slot(7, 1007, 1, usage(GIB, layout == Layout.L0A ? 0 : 30))
        .slot(8, 8, 1, usage(256L << 20, 0))
        .build();
  }

  @ParameterizedTest
  @EnumSource(Layout.class)
  void inspect_codecWrittenFileOfEveryLayout_reportsHeaderProcessesAndResolution(Layout layout) {
    Path region = fx.region(UID_A, "main", spec(layout));
    fx.process(1007, 7).gpu(region).write();
    Result r = cli(node("inspect", "--json"));
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out())
        .contains("\"layout\":\"" + layout.label() + "\"")
        .contains(
            "\"uuid\":\"" + GPU0 + "\",\"memory_limit_bytes\":4294967296,\"sm_limit_percent\":50")
        .contains(
            "\"pid\":7,\"hostpid\":1007,\"resolved_host_pid\":1007,\"alive\":true,\"hostpid_correct\":true")
        .contains("\"pid\":8,\"hostpid\":8,\"resolved_host_pid\":null,\"alive\":false");
    Result text = cli(node("inspect", region.toString()));
    assertThat(text.out())
        .contains("layout " + layout.label())
        .contains("real 1007")
        .contains("GONE");
  }

  /**
   * The node commands read serve's flag definitions: {@code --path.cache-root} and {@code
   * --path.procfs} (and the NVML flags for doctor) give the same result as the old spellings.
   */
  @Test
  void nodeCommands_takeServesPathFlags_oldSpellingsStayAliases() {
    Path region = fx.region(UID_A, "main", spec(Layout.V1_2));
    fx.process(1007, 7).gpu(region).write();
    String[] shared = {
      "--path.cache-root", fx.cacheRoot.toString(), "--path.procfs=" + fx.proc, "--json"
    };
    Result inspect = cli(concat(new String[] {"inspect"}, shared));
    assertThat(inspect.code()).as(inspect.err()).isZero();
    assertThat(withoutTime(inspect.out()))
        .contains("\"pid\":7,\"hostpid\":1007,\"resolved_host_pid\":1007,\"alive\":true")
        .isEqualTo(withoutTime(cli(node("inspect", "--json")).out()));
    for (String cmd : List.of("cleanup", "unlock")) {
      Result r = cli(concat(new String[] {cmd}, shared));
      assertThat(r.err()).as(cmd).doesNotContain("Unknown option");
      assertThat(r.code()).as(cmd + ": " + r.err()).isEqualTo(cli(node(cmd, "--json")).code());
    }
    Result doctor =
        cli(
            concat(
                new String[] {"doctor", "--nvml=false", "--window", "0s", "--node-name", ""},
                shared));
    assertThat(doctor.err()).doesNotContain("Unknown option");
    assertThat(doctor.out()).contains("NVML not queried");
    assertThat(doctor.code())
        .isEqualTo(cli(node("doctor", "--no-nvml", "--window", "0s", "--json")).code());
  }

  private static String withoutTime(String json) {
    return json.replaceFirst("\"at\":\"[^\"]*\"", "");
  }

  private static String[] concat(String[] a, String[] b) {
    List<String> all = new ArrayList<>(List.of(a));
    all.addAll(List.of(b));
    return all.toArray(String[]::new);
  }

  @Test
  void inspect_hostPidEqualsContainerPid_flaggedWrong() {
    Path region =
        fx.region(UID_A, "main", OperatorFixture.v12(GIB, 0).slot(7, 7, 1, usage(GIB, 0)).build());
    fx.process(1007, 7).gpu(region).write();
    Result r = cli(node("inspect"));
    assertThat(r.out()).contains("hostpid 7").contains("real 1007").contains("WRONG-PID");
  }

  @Test
  void inspect_nothingThere_exit3() {
    Result r = cli(node("inspect"));
    assertThat(r.code()).isEqualTo(3);
    assertThat(r.out()).contains("no container directories");
  }

  @Test
  void inspect_garbageFile_reportedNotFatal() throws IOException {
    Path dir = fx.emptyContainer(UID_A, "main");
    Files.write(dir.resolve("junk.cache"), new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
    Result r = cli(node("inspect", "--json"));
    assertThat(r.code()).isEqualTo(3);
    assertThat(r.out()).contains("\"error\":\"");
  }

  @Test
  void cleanup_dryRunThenApply_freesOnlyDeadSlots() throws Exception {
    Path tool = shrregTool();
    Path region = fx.region(UID_A, "main", spec(Layout.V1_2));
    fx.process(1007, 7).gpu(region).write();
    Result dry = cli(node("cleanup"));
    assertThat(dry.code()).as(dry.out() + dry.err()).isEqualTo(1);
    assertThat(dry.out())
        .contains("would free dead slots in " + region)
        .contains("container pid 8 GONE")
        .contains("--cleanup --pids 8:8")
        .contains("dry run");
    try (RegionFile f = RegionFile.openReadOnly(region)) {
      assertThat(f.snapshot().processes()).hasSize(2);
    }
    Result applied = cli(node("cleanup", "--apply", "--shrreg-tool", tool.toString(), "--json"));
    assertThat(applied.code()).as(applied.out() + applied.err()).isZero();
    assertThat(applied.out()).contains("\"dry_run\":false").contains("\"exit_code\":0");
    assertThat(cli(node("cleanup", "--apply", "--shrreg-tool", tool.toString())).out())
        .as("a second --apply has nothing left to free")
        .contains("nothing to do");
    try (RegionFile f = RegionFile.openReadOnly(region)) {
      RegionSnapshot s = f.snapshot();
      assertThat(s.processes()).extracting(p -> p.pid()).containsExactly(7);
      assertThat(s.usedBytes(0)).isEqualTo(GIB);
    }
    assertThat(cli(node("cleanup")).out()).contains("nothing to do");
  }

  @Test
  void unlock_deadHolder_releasedOnlyWithApply_liveHolderNeverTouched() throws Exception {
    Path tool = shrregTool();
    Path dead =
        fx.region(
            UID_A,
            "main",
            OperatorFixture.v12(GIB, 0).ownerPid(99).slot(7, 1007, 1, usage(GIB, 0)).build());
    Path live =
        fx.region(
            OperatorFixture.UID_B,
            "side",
            OperatorFixture.v12(GIB, 0).ownerPid(5).slot(5, 2005, 1, usage(GIB, 0)).build());
    fx.process(1007, 7).gpu(dead).write();
    fx.process(2005, 5).pod(OperatorFixture.UID_B).gpu(live).write();
    Result dry = cli(node("unlock"));
    assertThat(dry.code()).isEqualTo(1);
    assertThat(dry.out())
        .contains("would release the lock of " + dead)
        .contains("--force-unlock --holder 99")
        .contains("is alive; not touched");
    Result applied = cli(node("unlock", "--apply", "--shrreg-tool", tool.toString()));
    assertThat(applied.code()).as(applied.out()).isZero();
    // In words, not shrreg-tool's JSON.
    assertThat(applied.out())
        .contains("-> done: released the lock of a holder that is gone")
        .doesNotContain("{\"");
    try (RegionFile f = RegionFile.openReadOnly(dead);
        RegionFile g = RegionFile.openReadOnly(live)) {
      assertThat(f.snapshot().ownerPid()).isZero();
      assertThat(g.snapshot().ownerPid()).isEqualTo(5);
    }
  }

  @Test
  void unlock_missingTool_exit2WithReason() {
    fx.region(UID_A, "main", OperatorFixture.v12(GIB, 0).ownerPid(99).build());
    Result r =
        cli(node("unlock", "--apply", "--shrreg-tool", tmp.resolve("no-such-tool").toString()));
    assertThat(r.code()).isEqualTo(2);
    assertThat(r.out())
        .contains("cannot run")
        .contains("hint: --apply runs shrreg-tool; put it on PATH or pass --shrreg-tool PATH");
  }

  @Test
  void doctor_cli_exitCodeIsWorstFinding() {
    Path region =
        fx.region(
            UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50).slot(7, 1007, 1, usage(GIB, 30)).build());
    fx.process(1007, 7).gpu(region).write();
    String handshake = "hami.io/node-handshake=" + (System.currentTimeMillis() / 1000);
    String register = "hami.io/node-nvidia-register=[{\"id\":\"" + GPU0 + "\",\"count\":10}]";
    Result healthy =
        cli(
            node(
                "doctor",
                "--no-nvml",
                "--window",
                "0s",
                "--annotation",
                handshake,
                "--annotation",
                register));
    assertThat(healthy.code()).as(healthy.out()).isZero();
    assertThat(healthy.out()).contains("[SKIP] 13 nvml-errors").contains("verdict: OK");

    fx.region(OperatorFixture.UID_B, "side", OperatorFixture.v12(GIB, 0).ownerPid(99).build());
    Result broken =
        cli(
            node(
                "doctor",
                "--no-nvml",
                "--window",
                "0s",
                "--annotation",
                handshake,
                "--annotation",
                register));
    assertThat(broken.code()).as(broken.out()).isEqualTo(2);
    assertThat(broken.out()).contains("[FAIL]  5 lock-dead-holder").contains("verdict: FAIL");
    Result onlyA =
        cli(
            node(
                "doctor",
                "--no-nvml",
                "--window",
                "0s",
                "--json",
                "--uid",
                UID_A,
                "--annotation",
                handshake,
                "--annotation",
                register));
    assertThat(onlyA.code()).isZero();
    assertThat(onlyA.out())
        .contains("\"verdict\":\"ok\"")
        .contains("\"check\":9,\"id\":\"hostpid-wrong\",\"severity\":\"ok\"")
        .doesNotContain(OperatorFixture.UID_B);
    Result bad = cli(node("doctor", "--window", "soon"));
    assertThat(bad.code()).isEqualTo(3);
  }

  @Test
  void inspect_regionWrittenByLibvgpu_readBack() throws Exception {
    Path lib = Path.of("../libvgpu/build/libvgpu.so").toAbsolutePath();
    Path app = Path.of("../libvgpu/build/tools-test/region_app").toAbsolutePath();
    assumeTrue(
        Files.exists(lib) && Files.isExecutable(app),
        "libvgpu and region_app not built (make -C libvgpu all test)");
    Path dir = fx.emptyContainer(UID_A, "trainer");
    Path file = dir.resolve("real.cache");
    ProcessBuilder pb = new ProcessBuilder(app.toString(), "64");
    pb.environment().put("LD_PRELOAD", lib.toString());
    pb.environment().put("LD_LIBRARY_PATH", lib.getParent().resolve("fake").toString());
    pb.environment().put("CUDA_DEVICE_MEMORY_SHARED_CACHE", file.toString());
    pb.environment().put("CUDA_DEVICE_MEMORY_LIMIT", "2g");
    pb.environment().put("CUDA_DEVICE_SM_LIMIT", "30");
    Process p = pb.redirectError(ProcessBuilder.Redirect.DISCARD).start();
    try {
      String ready =
          new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))
              .readLine();
      assertThat(ready).startsWith("ready ");
      Result r = cli("inspect", "--json", "--proc-root", "/proc", file.toString());
      assertThat(r.code()).as(r.err()).isZero();
      assertThat(r.out())
          .contains("\"layout\":\"v1.2\"")
          .contains("\"memory_limit_bytes\":2147483648,\"sm_limit_percent\":30")
          .contains("\"pid\":" + p.pid() + ",")
          .doesNotContain("\"library_version\":null");
    } finally {
      p.destroyForcibly();
      p.waitFor(10, TimeUnit.SECONDS);
    }
  }

  @Test
  void inspect_extensionFields_shown() {
    Path region =
        fx.region(
            UID_A,
            "main",
            OperatorFixture.v12(GIB, 0)
                .slot(7, 1007, 1, usage(GIB, 0))
                .extension(
                    new RegionExtension(
                        1, 0, 0, 1, "libvgpu 0.1.0", UID_A, "main", 0, 0, List.of()))
                .build());
    fx.process(1007, 7).gpu(region).write();
    Result r = cli(node("inspect"));
    assertThat(r.out()).contains("library libvgpu 0.1.0").contains("lock: free");
  }
}
