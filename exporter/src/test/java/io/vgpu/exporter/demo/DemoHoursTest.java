package io.vgpu.exporter.demo;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.regioncodec.DeviceUsage;
import io.vgpu.regioncodec.ExtensionDevice;
import io.vgpu.regioncodec.ProcessSlot;
import io.vgpu.regioncodec.RegionFile;
import io.vgpu.regioncodec.RegionSnapshot;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The demo node over four hours of a fast clock: healthy containers stay healthy (memory inside the
 * limit, no OOM rejections, utilization within the SM limit, the limiter throttling only the
 * container that runs at its limit, NVML's per-process memory equal to the region's, a fresh HAMi
 * handshake) and each deliberate problem stays exactly its own. At the end, where the clock meets
 * the wall clock, {@code doctor} judges the node: the problem pods fail with their check, every
 * other container is OK.
 */
class DemoHoursTest {
  private static final Duration HOURS = Duration.ofHours(4);
  private static final Duration STEP = Duration.ofSeconds(30);
  private static final Pattern PROCESS =
      Pattern.compile("(?m)^process (\\d+) pid=(\\d+) used=(\\d+)$");
  private static final Pattern SAMPLE =
      Pattern.compile("(?m)^sample (\\d+) pid=(\\d+) sm=(\\d+) mem=\\d+ ts=(\\d+)$");

  @TempDir Path tmp;

  /** A clock the test moves. */
  static final class StepClock extends Clock {
    private volatile Instant now;

    StepClock(Instant start) {
      this.now = start;
    }

    void advance(Duration d) {
      now = now.plus(d);
    }

    @Override
    public ZoneId getZone() {
      return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
      return this;
    }

    @Override
    public Instant instant() {
      return now;
    }
  }

  @Test
  void fourHoursOfFastClock_healthyStaysHealthy_andEachProblemStaysItsOwn() throws Exception {
    StepClock clock = new StepClock(Instant.now().minus(HOURS));
    Path root = tmp.resolve("containers");
    Path script = tmp.resolve("fake-nvml.conf");
    try (DemoNode node =
        DemoNode.create(root, new DemoOptions(5, 2, 0, 0, true, true, false, clock))) {
      Map<Path, Long> throttledBefore = new HashMap<>();
      Map<Path, Long> oomBefore = new HashMap<>();
      long steps = HOURS.dividedBy(STEP);
      for (long i = 1; i <= steps; i++) {
        clock.advance(STEP);
        node.tick();
        if (i % 20 == 0 || i == steps) {
          node.writeFakeNvmlScript(script, "NVIDIA_H100_80GB_HBM3");
          checkMoment(node, clock, Files.readString(script), throttledBefore, oomBefore);
        }
      }
      assertThat(oomBefore.values())
          .as("the OOM counter of the container at its limit rose all along")
          .anyMatch(n -> n >= HOURS.toMinutes());

      Path proc = tmp.resolve("proc");
      node.writeProcfs(proc);
      judgeWithDoctor(node, root, proc);
    }
  }

  private static void checkMoment(
      DemoNode node,
      StepClock clock,
      String script,
      Map<Path, Long> throttledBefore,
      Map<Path, Long> oomBefore) {
    var handshake = node.metadata().node().handshake();
    assertThat(handshake).as("handshake refreshed at %s", clock.instant()).isPresent();
    assertThat(Duration.between(handshake.get(), clock.instant()).abs())
        .isLessThanOrEqualTo(Duration.ofSeconds(1));
    Map<String, Long> nvmlBytes = new HashMap<>();
    Matcher p = PROCESS.matcher(script);
    while (p.find()) {
      nvmlBytes.put(p.group(1) + "/" + p.group(2), Long.parseLong(p.group(3)));
    }
    Map<String, Integer> newestSample = new HashMap<>();
    Map<String, Long> newestStamp = new HashMap<>();
    Matcher s = SAMPLE.matcher(script);
    while (s.find()) {
      String key = s.group(1) + "/" + s.group(2);
      long ts = Long.parseLong(s.group(4));
      if (ts >= newestStamp.getOrDefault(key, 0L)) {
        newestStamp.put(key, ts);
        newestSample.put(key, Integer.parseInt(s.group(3)));
      }
    }
    for (DemoContainer c : node.containers()) {
      if (!c.running()) {
        continue;
      }
      String what = c.pod + "/" + c.container + " at " + clock.instant();
      RegionSnapshot r;
      try (RegionFile f = RegionFile.openReadOnly(c.file)) {
        r = f.snapshot();
      }
      assertThat(r.lastKernelTimeEpochSeconds())
          .as("%s: last kernel", what)
          .isEqualTo(
              c.behavior == DemoContainer.Behavior.IDLE
                  ? r.lastKernelTimeEpochSeconds()
                  : clock.instant().getEpochSecond());
      for (int d = 0; d < c.devices.size(); d++) {
        int gpu = c.devices.get(d);
        long used = 0;
        int nvmlUtil = 0;
        for (int slot = 0; slot < c.children.size(); slot++) {
          ProcessSlot ps = r.processes().get(slot);
          DeviceUsage u = ps.devices().get(d);
          used += u.totalBytes();
          String key = gpu + "/" + c.children.get(slot).hostPid();
          assertThat(nvmlBytes.get(key))
              .as("%s: NVML memory of pid %s equals its slot's", what, key)
              .isEqualTo(u.totalBytes());
          nvmlUtil += newestSample.getOrDefault(key, 0);
          if (c.is(DemoProblem.HOSTPID_WRONG)) {
            assertThat(u.smUtilPercent()).as("%s: the HAMi bug reads 0", what).isZero();
            assertThat(ps.hostPid()).isNotEqualTo(c.children.get(slot).hostPid());
          } else {
            assertThat(ps.hostPid()).isEqualTo(c.children.get(slot).hostPid());
            assertThat(u.smUtilPercent()).isEqualTo((long) newestSample.getOrDefault(key, 0));
          }
        }
        double share = (double) used / c.limitBytes;
        if (c.is(DemoProblem.AT_MEMORY_LIMIT)) {
          assertThat(share).as("%s: at its limit", what).isBetween(0.95, 1.0);
        } else {
          assertThat(share).as("%s: well inside its limit", what).isBetween(0.05, 0.8);
        }
        int scale = c.smLimit <= 0 || c.smLimit >= 100 ? 100 : c.smLimit;
        assertThat(nvmlUtil).as("%s: utilization within the SM limit", what).isLessThan(scale + 1);
        if (c.behavior == DemoContainer.Behavior.BUSY) {
          assertThat(nvmlUtil).as("%s: busy at its limit", what).isGreaterThan(scale * 8 / 10);
        }
        if (r.extension().isEmpty()) {
          assertThat(c.hamiCore).isTrue();
          continue;
        }
        ExtensionDevice x = r.extension().get().devices().get(d);
        Path key = c.file.resolveSibling(c.file.getFileName() + "#" + d);
        long throttledGrowth = x.throttledNanos() - throttledBefore.getOrDefault(key, 0L);
        throttledBefore.put(key, x.throttledNanos());
        if (c.behavior == DemoContainer.Behavior.BUSY) {
          assertThat(throttledGrowth)
              .as("%s: the limiter throttles at the limit", what)
              .isPositive();
        } else {
          assertThat(x.throttledNanos()).as("%s: no throttling below the limit", what).isZero();
          assertThat(x.launchesDelayed()).isZero();
        }
        if (c.is(DemoProblem.AT_MEMORY_LIMIT)) {
          assertThat(x.oomRejections())
              .as("%s: OOM rejections rise", what)
              .isGreaterThan(oomBefore.getOrDefault(key, 0L));
          oomBefore.put(key, x.oomRejections());
        } else {
          assertThat(x.oomRejections()).as("%s: no OOM rejections", what).isZero();
        }
      }
    }
  }

  private static void judgeWithDoctor(DemoNode node, Path root, Path proc) throws Exception {
    StringWriter out = new StringWriter();
    String handshake = node.metadata().node().handshakeRaw().orElseThrow();
    int code =
        io.vgpu.exporter.cli.Cli.run(
            new String[] {
              "doctor",
              "--json",
              "--no-nvml",
              "--window",
              "0s",
              "--path.cache-root=" + root,
              "--path.procfs=" + proc,
              "--annotation",
              "hami.io/node-handshake=" + handshake,
              "--annotation",
              "hami.io/node-nvidia-register=[{\"id\":\""
                  + DemoNode.gpuUuid(0)
                  + "\"},{\"id\":\""
                  + DemoNode.gpuUuid(1)
                  + "\"}]"
            },
            new PrintWriter(out, true),
            new PrintWriter(new StringWriter(), true));
    assertThat(code).as(out.toString()).isEqualTo(2);
    JsonNode doc = JsonMapper.builder().build().readTree(out.toString());
    Map<String, String> verdicts = new HashMap<>();
    Map<String, List<String>> failing = new HashMap<>();
    for (JsonNode c : doc.get("containers")) {
      String key = c.get("pod_uid").asString() + "_" + c.get("container").asString();
      verdicts.put(key, c.get("verdict").asString());
    }
    for (JsonNode f : doc.get("findings")) {
      String sev = f.get("severity").asString();
      if (sev.equals("warn") || sev.equals("fail")) {
        failing
            .computeIfAbsent(f.get("subject").asString(), k -> new ArrayList<>())
            .add(f.get("id").asString());
      }
    }
    for (DemoContainer c : node.containers()) {
      String key = c.podUid + "_" + c.container;
      String expected = c.problem.isEmpty() || c.is(DemoProblem.AT_MEMORY_LIMIT) ? "ok" : "fail";
      assertThat(verdicts.get(key))
          .as("%s %s; findings %s", key, c.problem, failing)
          .isEqualToIgnoringCase(expected);
    }
    assertThat(failing.toString())
        .contains("hostpid-wrong", "zombie-slots", "lock-dead-holder")
        .doesNotContain("handshake", "registration", "memory-gap", "limiter");
  }
}
