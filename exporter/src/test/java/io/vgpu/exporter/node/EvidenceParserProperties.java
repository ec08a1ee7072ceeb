package io.vgpu.exporter.node;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.doctor.Doctor;
import io.vgpu.exporter.doctor.DoctorReport;
import io.vgpu.exporter.doctor.Finding;
import io.vgpu.exporter.doctor.Inspection;
import io.vgpu.exporter.doctor.Json;
import io.vgpu.exporter.doctor.RepairPlan;
import io.vgpu.exporter.testing.OperatorFixture;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionSpec;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The operator commands read bytes other programs control: procfs files of tenant processes and
 * region files. Hostile content never throws out of the collector or the doctor, and JSON output
 * stays well-formed whatever the strings hold. (The parsers of {@code maps} and {@code environ}
 * have their properties beside them in hostpid-resolver: {@code MapsEnvironProperties}.)
 */
class EvidenceParserProperties {

  @Property(tries = 200)
  void json_anyString_escapesEveryControlCharacter(@ForAll String s) {
    String json = Json.write(Map.of("k", s, "l", List.of(s, 1, true)));
    assertThat(json).doesNotContainPattern("[\\x00-\\x1f]");
    assertThat(json).startsWith("{").endsWith("}");
    // Quotes inside the value are always escaped: the only unescaped quotes delimit tokens.
    assertThat(
            json.replace("\\\\", "").replace("\\\"", "").chars().filter(c -> c == '"').count() % 2)
        .isZero();
  }

  @Property(tries = 60)
  void doctor_corruptedRegion_everyCheckRunsAndOutputsStayWellFormed(
      @ForAll @IntRange(min = 0, max = 2_043_199) int offset,
      @ForAll @Size(min = 1, max = 64) byte[] junk,
      @ForAll boolean ext)
      throws IOException {
    Path tmp = Files.createTempDirectory("ops-prop");
    try {
      OperatorFixture fx = new OperatorFixture(tmp);
      RegionSpec.Builder b =
          OperatorFixture.v12(1L << 30, 50).slot(7, 1007, 1, OperatorFixture.usage(1L << 20, 10));
      if (ext) {
        b.extension(
            new io.vgpu.regioncodec.RegionExtension(
                1, 0, 0, 1, "x", OperatorFixture.UID_A, "main", 7, 1, List.of()));
      }
      Path region = fx.region(OperatorFixture.UID_A, "main", b.build());
      fx.process(1007, 7).gpu(region).write();
      try (FileChannel ch =
          FileChannel.open(region, StandardOpenOption.WRITE, StandardOpenOption.READ)) {
        long pos = Math.min(offset, Math.max(0, ch.size() - junk.length));
        ch.write(ByteBuffer.wrap(junk), pos);
      }
      NodeEvidence evidence = fx.evidence();
      assertDoctorReportWellFormed(Doctor.standard().run(evidence));
      assertInspectionDescribesTheRegion(evidence, region);
      assertCleanupNeverTargetsTheLiveProcess(RepairPlan.cleanup(evidence), region);
    } finally {
      try (var s = Files.walk(tmp)) {
        s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static final JsonMapper JSON = JsonMapper.builder().build();
  private static final Set<String> LAYOUT_LABELS =
      Arrays.stream(Layout.values()).map(Layout::label).collect(Collectors.toSet());

  /**
   * Every one of the seventeen checks ran to a verdict (a check that throws is reported as "check
   * could not run", which hostile bytes must never cause), findings are ordered, and the JSON
   * parses back to the same verdict.
   */
  private static void assertDoctorReportWellFormed(DoctorReport r) {
    assertThat(r.findings())
        .noneMatch(f -> f.summary().startsWith("check could not run"))
        .extracting(Finding::check)
        .containsAll(IntStream.rangeClosed(1, 15).boxed().toList());
    assertThat(r.findings())
        .isSortedAccordingTo(
            Comparator.comparingInt(Finding::check).thenComparing(Finding::subject));
    JsonNode json = JSON.readTree(r.toJson());
    assertThat(json.get("exit_code").asInt()).isEqualTo(r.exitCode());
    assertThat(json.get("verdict").asString()).isEqualTo(r.worst().label());
    assertThat(json.get("findings").size()).isEqualTo(r.findings().size());
  }

  /**
   * {@code inspect} shows the one container and its one region, either decoded (under a layout the
   * codec knows) or as unreadable with a reason; the text carries no control character a tenant
   * could use to rewrite an operator's terminal.
   */
  private static void assertInspectionDescribesTheRegion(NodeEvidence e, Path region) {
    JsonNode model = JSON.readTree(Json.write(Inspection.model(e)));
    assertThat(model.get("containers").size()).isEqualTo(1);
    JsonNode c = model.get("containers").get(0);
    assertThat(c.get("pod_uid").asString()).isEqualTo(OperatorFixture.UID_A);
    assertThat(c.get("container").asString()).isEqualTo("main");
    assertThat(c.get("regions").size()).isEqualTo(1);
    JsonNode r = c.get("regions").get(0);
    assertThat(r.get("file").asString()).isEqualTo(region.toString());
    String text = Inspection.text(e);
    assertThat(text)
        .contains(region.toString())
        .doesNotContainPattern("[\\x00-\\x09\\x0b-\\x1f\\x7f]");
    if (r.has("error")) {
      assertThat(r.has("layout")).isFalse();
      assertThat(r.get("error").asString()).isNotBlank();
      assertThat(text).contains("unreadable: ");
    } else {
      assertThat(LAYOUT_LABELS).contains(r.get("layout").asString());
      assertThat(text).contains("layout " + r.get("layout").asString() + ",");
      assertThat(r.get("devices").size()).isBetween(0, 16);
    }
  }

  /**
   * Corruption may invent dead slots, but a slot that names the live process (container pid 7 and
   * no or its own start time) is never freed, and every action is about the one region.
   */
  private static void assertCleanupNeverTargetsTheLiveProcess(RepairPlan plan, Path region) {
    for (RepairPlan.Action a : plan.actions()) {
      assertThat(a.kind()).isEqualTo(RepairPlan.Kind.CLEANUP);
      assertThat(a.file()).isEqualTo(region);
      assertThat(a.subject()).isEqualTo(OperatorFixture.UID_A + "_main");
      assertThat(a.slotGuards()).hasSameSizeAs(a.pids());
      for (int i = 0; i < a.pids().size(); i++) {
        assertThat(a.slotGuards().get(i)).startsWith(a.pids().get(i) + ":");
      }
      assertThat(a.slotGuards()).noneMatch(g -> LIVE_SLOT_GUARD.matcher(g).matches());
    }
  }

  /** The fixture's live process: container pid 7, start time 4242 (or none recorded). */
  private static final Pattern LIVE_SLOT_GUARD = Pattern.compile("7:-?\\d+(:4242)?");
}
