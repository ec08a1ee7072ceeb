package io.vgpu.exporter.cli;

import static io.vgpu.exporter.testing.OperatorFixture.usage;
import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.OperatorFixture;
import io.vgpu.exporter.testing.StallingFuse;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 31 item 9 for the operator commands: a pod process whose root is a filesystem its tenant
 * serves and froze (a real FUSE mount whose {@code /etc/ld.so.preload} reads never return: the
 * reader sleeps in D state). {@code doctor}, {@code inspect} and {@code cleanup} each give up that
 * file at its deadline with one log line naming it and why, finish their report, and judge the
 * pod's live processes as before (cleanup plans nothing). Before the deadline reads, each command
 * hung for as long as the tenant wanted.
 */
class StalledTenantReadCliTest {
  private static final long GIB = 1L << 30;

  @TempDir Path tmp;

  record Result(int code, String out, String log, long millis) {}

  @Test
  @Timeout(value = 180, unit = TimeUnit.SECONDS)
  void doctorInspectCleanup_readThatNeverReturns_givenUpWithOneLine_reportFinishes()
      throws Exception {
    OperatorFixture fx = new OperatorFixture(tmp);
    Path region =
        fx.region(
            OperatorFixture.UID_A,
            "main",
            OperatorFixture.v12(4 * GIB, 50)
                .slot(7, 1007, 1, usage(GIB, 30))
                .slot(8, 1008, 1, usage(GIB, 30))
                .build());
    fx.process(1007, 7).gpu(region).write();
    fx.process(1008, 8).gpu(region).write();
    try (StallingFuse fuse = StallingFuse.start(tmp.resolve("frozen"))) {
      fuse.becomeRootOf(fx.proc.resolve("1008"));
      for (List<String> cmd :
          List.of(
              List.of("doctor", "--no-nvml", "--window", "0s"),
              List.of("inspect"),
              List.of("cleanup"))) {
        List<String> args = new ArrayList<>(cmd);
        args.addAll(
            List.of("--cache-root", fx.cacheRoot.toString(), "--proc-root", fx.proc.toString()));
        Result r = cli(args.toArray(String[]::new));
        System.out.printf(
            "stalled tenant read: %s finished in %d ms, exit %d%n", cmd, r.millis(), r.code());
        assertThat(r.millis()).as("%s ms", cmd).isLessThan(20_000L);
        assertThat(r.code()).as("%s exit; out:%n%s", cmd, r.out()).isBetween(0, 1);
        List<String> gaveUp =
            r.log().lines().filter(l -> l.contains("gave up reading a tenant file")).toList();
        // One line per file given up, naming it and why: the stalled file at its deadline, and
        // once two of the pod's reads are blocked, its further files at once (the commands share
        // this JVM's readers here; the third finds two still blocked and judges the pod UNKNOWN).
        assertThat(gaveUp).as("%s log:%n%s", cmd, r.log()).isNotEmpty();
        assertThat(gaveUp)
            .allMatch(l -> l.contains("file=" + fx.proc.resolve("100")), "a file of the pod's")
            .allMatch(
                l ->
                    l.contains("why=\"no answer within 2000 ms\"")
                        || l.contains(
                            "why=\"earlier reads of this pod's files are still blocked\""),
                "says why");
        assertThat(String.join("\n", gaveUp)).contains("1008/root/etc/ld.so.preload");
        if (cmd.getFirst().equals("cleanup")) {
          assertThat(r.out()).startsWith("nothing to do"); // no slot of a live process freed
        } else {
          assertThat(r.out()).as("%s reports the pod", cmd).contains(OperatorFixture.UID_A);
        }
        if (cmd.getFirst().equals("inspect")) {
          assertThat(r.out()).containsPattern("slot 1 +pid 8 +hostpid 1008 +real 1008 +ALIVE");
        }
      }
      assertThat(fuse.stalledReads()).as("reads the frozen filesystem left hanging").isPositive();
    }
  }

  /** One command in this JVM on its own thread, its log (stderr) captured. */
  private static Result cli(String... args) throws Exception {
    ByteArrayOutputStream log = new ByteArrayOutputStream();
    PrintStream before = System.err;
    System.setErr(new PrintStream(log, true, StandardCharsets.UTF_8));
    try {
      long t0 = System.nanoTime();
      StringWriter out = new StringWriter();
      StringWriter err = new StringWriter();
      int code =
          CompletableFuture.supplyAsync(
                  () -> Cli.run(args, new PrintWriter(out, true), new PrintWriter(err, true)))
              .get(60, TimeUnit.SECONDS);
      return new Result(
          code,
          out + err.toString(),
          log.toString(StandardCharsets.UTF_8),
          (System.nanoTime() - t0) / 1_000_000);
    } finally {
      System.setErr(before);
    }
  }
}
