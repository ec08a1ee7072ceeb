package io.vgpu.exporter.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.exporter.testing.OperatorFixture;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * {@code inspect --json} on region files written by HAMi-core's own code ({@code
 * testdata/hami-core}, see its README.md): every header, device and process value the command
 * prints must equal the fixture's manifest.
 */
class HamiCoreFixtureInspectTest {
  static final Path DIR = Path.of("../testdata/hami-core").toAbsolutePath().normalize();
  static final JsonMapper JSON = JsonMapper.builder().build();

  @TempDir Path tmp;

  static Stream<JsonNode> fixtures() throws IOException {
    JsonNode manifest = JSON.readTree(DIR.resolve("manifest.json").toFile());
    List<JsonNode> all = new ArrayList<>();
    manifest.get("fixtures").forEach(all::add);
    assertThat(all).isNotEmpty();
    return all.stream();
  }

  @ParameterizedTest
  @MethodSource("fixtures")
  void inspectJson_hamiWrittenRegion_reportsTheManifestValues(JsonNode fx) throws IOException {
    OperatorFixture ops = new OperatorFixture(tmp);
    Path file = ops.emptyContainer(OperatorFixture.UID_A, "main").resolve("hami.cache");
    try (InputStream in =
        new GZIPInputStream(Files.newInputStream(DIR.resolve(fx.get("file").asString())))) {
      Files.write(file, in.readAllBytes());
    }
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        Cli.run(
            new String[] {"inspect", "--json", "--proc-root", ops.proc.toString(), file.toString()},
            new PrintWriter(out, true),
            new PrintWriter(err, true));
    assertThat(code).as(err.toString()).isZero();

    JsonNode containers = JSON.readTree(out.toString()).get("containers");
    assertThat(containers).hasSize(1);
    JsonNode regions = containers.get(0).get("regions");
    assertThat(regions).hasSize(1);
    JsonNode r = regions.get(0);
    assertThat(r.has("error")).as(r.toString()).isFalse();
    assertThat(r.get("layout").asString()).isEqualTo(fx.get("layout").asString());
    assertThat(r.get("version").get("major").asLong()).isEqualTo(fx.get("major_version").asLong());
    assertThat(r.get("version").get("minor").asLong()).isEqualTo(fx.get("minor_version").asLong());
    assertThat(r.get("library_version").isNull()).as("HAMi writes no extension").isTrue();
    for (String k :
        List.of(
            "proc_num", "utilization_switch", "recent_kernel", "priority", "last_kernel_time")) {
      assertThat(r.get(k).asLong()).as(k).isEqualTo(fx.get(k).asLong());
    }

    JsonNode devices = r.get("devices");
    assertThat(devices).hasSize(fx.get("device_num").asInt());
    for (int d = 0; d < devices.size(); d++) {
      JsonNode got = devices.get(d);
      JsonNode want = fx.get("devices").get(d);
      assertThat(got.get("index").asInt()).isEqualTo(want.get("index").asInt());
      assertThat(got.get("uuid").asString()).isEqualTo(want.get("uuid").asString());
      assertThat(got.get("memory_limit_bytes").asLong())
          .isEqualTo(want.get("memory_limit_bytes").asLong());
      assertThat(got.get("sm_limit_percent").asLong())
          .isEqualTo(want.get("sm_limit_percent").asLong());
      assertThat(got.get("used_bytes").asLong())
          .as("device %d used", d)
          .isEqualTo(fx.get("used_bytes_live").get(d).asLong());
    }

    List<JsonNode> live = new ArrayList<>();
    for (JsonNode slot : fx.get("slots")) {
      if (slot.get("pid").asLong() != 0 && slot.get("status").asLong() != 0) {
        live.add(slot);
      }
    }
    JsonNode procs = r.get("processes");
    assertThat(procs).hasSize(live.size());
    for (int i = 0; i < live.size(); i++) {
      JsonNode got = procs.get(i);
      JsonNode want = live.get(i);
      for (String k : List.of("slot", "pid", "hostpid", "status")) {
        assertThat(got.get(k).asLong()).as("process %d %s", i, k).isEqualTo(want.get(k).asLong());
      }
      assertThat(got.get("alive").asBoolean()).as("empty proc root").isFalse();
      JsonNode gotDevs = got.get("devices");
      assertThat(gotDevs).hasSize(want.get("devices").size());
      for (int d = 0; d < gotDevs.size(); d++) {
        JsonNode g = gotDevs.get(d);
        JsonNode w = want.get("devices").get(d);
        assertThat(g.get("index").asInt()).isEqualTo(w.get("index").asInt());
        assertThat(g.get("used_bytes").asLong()).isEqualTo(w.get("total_bytes").asLong());
        assertThat(g.get("context_bytes").asLong()).isEqualTo(w.get("context_bytes").asLong());
        assertThat(g.get("data_bytes").asLong()).isEqualTo(w.get("data_bytes").asLong());
        assertThat(g.get("sm_util").asLong()).isEqualTo(w.get("sm_util_percent").asLong());
      }
    }
  }
}
