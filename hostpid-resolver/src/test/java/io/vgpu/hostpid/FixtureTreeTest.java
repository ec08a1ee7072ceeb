package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.CgroupIdentity.Kind;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Reads every committed fixture procfs tree ({@code fixtures/hostpid/<scenario>/proc}) and checks
 * each process against the scenario's {@code expected.tsv} (written by {@code generate.py}).
 */
class FixtureTreeTest {

  static Path fixtures() throws URISyntaxException {
    return Path.of(FixtureTreeTest.class.getResource("/fixtures/hostpid").toURI());
  }

  static Stream<Arguments> expectations() throws IOException, URISyntaxException {
    Stream.Builder<Arguments> cases = Stream.builder();
    try (Stream<Path> scenarios = Files.list(fixtures())) {
      for (Path scenario : scenarios.filter(Files::isDirectory).sorted().toList()) {
        for (String line : Files.readAllLines(scenario.resolve("expected.tsv"))) {
          if (!line.startsWith("#")) {
            String[] f = line.split("\t", -1);
            cases.add(Arguments.of(scenario.getFileName() + "/" + f[0], scenario, f));
          }
        }
      }
    }
    return cases.build();
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("expectations")
  void read_fixtureProcess_matchesExpected(String name, Path scenario, String[] expected) {
    ProcFs procFs = new ProcFs(scenario.resolve("proc"));
    int pid = Integer.parseInt(expected[0]);

    ProcessRead read = procFs.read(pid);

    switch (expected[1]) {
      case "GONE" -> assertThat(read).isEqualTo(new ProcessRead.Gone(pid));
      case "FOUND" -> {
        assertThat(read).isInstanceOf(ProcessRead.Found.class);
        ProcessInfo process = ((ProcessRead.Found) read).process();
        List<Integer> nsPids = Arrays.stream(expected[8].split(",")).map(Integer::valueOf).toList();
        assertThat(process.hostPid()).isEqualTo(pid);
        assertThat(process.startTimeTicks()).isEqualTo(Long.parseLong(expected[7]));
        assertThat(process.nsPids()).isEqualTo(nsPids);
        CgroupIdentity cgroup = process.cgroup();
        assertThat(cgroup.kind()).isEqualTo(Kind.valueOf(expected[2]));
        assertThat(cgroup.podUid()).isEqualTo(optional(expected[3]));
        assertThat(cgroup.containerId()).isEqualTo(optional(expected[4]));
        assertThat(cgroup.runtime()).isEqualTo(optional(expected[5]));
        assertThat(cgroup.qosClass()).isEqualTo(optional(expected[6]));
      }
      default -> {
        assertThat(expected[1]).startsWith("UNUSABLE:");
        ProcessRead.Problem problem = ProcessRead.Problem.valueOf(expected[1].substring(9));
        assertThat(read).isEqualTo(new ProcessRead.Unusable(pid, problem));
      }
    }
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("scenarios")
  void listPids_fixtureTree_listsExactlyTheExpectedPids(String name, Path scenario)
      throws IOException {
    int[] expected =
        Files.readAllLines(scenario.resolve("expected.tsv")).stream()
            .filter(l -> !l.startsWith("#"))
            .mapToInt(l -> Integer.parseInt(l.substring(0, l.indexOf('\t'))))
            .sorted()
            .toArray();

    assertThat(new ProcFs(scenario.resolve("proc")).listPids()).containsExactly(expected);
  }

  static Stream<Arguments> scenarios() throws IOException, URISyntaxException {
    try (Stream<Path> scenarios = Files.list(fixtures())) {
      return scenarios
          .filter(Files::isDirectory)
          .sorted()
          .map(p -> Arguments.of(p.getFileName().toString(), p))
          .toList()
          .stream();
    }
  }

  private static Optional<String> optional(String field) {
    return field.equals("-") ? Optional.empty() : Optional.of(field);
  }
}
