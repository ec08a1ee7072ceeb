package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.internal.CgroupParser;
import io.vgpu.hostpid.internal.StatParser;
import io.vgpu.hostpid.internal.StatusParser;
import io.vgpu.hostpid.testing.ProcTree;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.UUID;
import java.util.stream.IntStream;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.statistics.Statistics;

/** Parsers of untrusted procfs text: never throw on junk, and read back what they are given. */
class ParserProperties {

  // --- junk never throws ------------------------------------------------------------------

  @Property
  void cgroupParse_arbitraryText_neverThrows(@ForAll String text) {
    assertThat(CgroupParser.parse(text)).isNotNull();
  }

  @Property
  void cgroupParse_arbitraryBytes_neverThrows(@ForAll @Size(max = 600) byte[] bytes) {
    assertThat(CgroupParser.parse(new String(bytes, StandardCharsets.ISO_8859_1))).isNotNull();
  }

  /** Junk made of the pieces real paths are made of reaches the deep branches of the parser. */
  @Property(tries = 3000)
  void cgroupParse_shuffledPathPieces_neverThrowsAndPodsAreWellFormed(
      @ForAll("pathPieces") List<String> pieces) {
    CgroupIdentity identity = CgroupParser.parse(String.join("", pieces));

    if (identity.isPod()) {
      assertThat(CgroupIdentity.normalizePodUid(identity.podUid().orElseThrow()))
          .isEqualTo(identity.podUid());
    }
  }

  @Provide
  Arbitrary<List<String>> pathPieces() {
    String uid = "0f8b2a51-9c3e-4d7a-8b21-5e6f7a8b9c0d";
    String cid = "4e50fa499b911da69945479da4c162ac646409b7e8d7352eb75aef571ade1b7b";
    return Arbitraries.of(
            "0::",
            "1:cpu:",
            "/",
            "kubepods",
            "kubepods.slice",
            "kubepods-",
            "burstable",
            "besteffort",
            "guaranteed",
            ".slice",
            ".scope",
            "pod",
            uid,
            uid.replace('-', '_'),
            cid,
            "cri-containerd-",
            "crio-",
            "docker-",
            "conmon-",
            "-",
            "_",
            ":",
            "\n",
            " ",
            "(deleted)",
            "kubelet-")
        .list()
        .ofMaxSize(24);
  }

  @Property
  void statParse_arbitraryText_neverThrowsAndAnyResultIsWhatTheLineSays(@ForAll String text) {
    assertReadsWhatTheLineSays(text, StatParser.parse(text));
  }

  /**
   * Raw bytes and real stat lines with a few bytes overwritten: whatever parses must be what the
   * line says (a parser that accepts a damaged line must not make up a pid or a start time).
   */
  @Property(tries = 2000)
  void statParse_arbitraryAndDamagedBytes_anyResultIsWhatTheLineSays(
      @ForAll("statBytes") byte[] bytes) {
    String text = new String(bytes, StandardCharsets.ISO_8859_1);
    StatParser.Stat stat = StatParser.parse(text);
    assertReadsWhatTheLineSays(text, stat);
    // The damaged lines must reach the accepting branch often enough to be judged at all.
    Statistics.label("parsed").collect(stat != null);
    Statistics.label("parsed").coverage(c -> c.check(true).percentage(p -> p >= 10));
  }

  @Provide
  Arbitrary<byte[]> statBytes() {
    Arbitrary<byte[]> damaged =
        Combinators.combine(
                Arbitraries.integers().between(1, Integer.MAX_VALUE),
                Arbitraries.strings().ofMaxLength(20),
                states(),
                Arbitraries.longs().between(0, 999_999_999_999L),
                Arbitraries.integers().between(0, 10_000).list().ofMaxSize(3),
                Arbitraries.bytes().list().ofSize(3))
            .as(
                (pid, comm, state, start, positions, values) -> {
                  byte[] b =
                      ProcTree.stat(pid, comm, state, start).getBytes(StandardCharsets.ISO_8859_1);
                  for (int i = 0; i < positions.size(); i++) {
                    b[positions.get(i) % b.length] = values.get(i);
                  }
                  return b;
                });
    return Arbitraries.oneOf(Arbitraries.bytes().array(byte[].class).ofMaxSize(400), damaged);
  }

  /**
   * An independent reading of a stat line: pid before " (", the state after the last ')', the start
   * time 19 fields after the state. A non-null result must agree with it.
   */
  private static void assertReadsWhatTheLineSays(String text, StatParser.Stat stat) {
    if (stat == null) {
      return;
    }
    assertThat(stat.pid()).isPositive();
    assertThat(Long.parseLong(text.substring(0, text.indexOf(" (")))).isEqualTo(stat.pid());
    String[] afterComm = text.substring(text.lastIndexOf(')') + 2).split(" ", -1);
    assertThat(afterComm[0]).isEqualTo(Character.toString(stat.state()));
    assertThat(stat.state()).isBetween('A', 'z');
    assertThat(Arrays.copyOfRange(afterComm, 1, 19)).allMatch(field -> !field.isEmpty());
    String startField = afterComm[19].split("\n", -1)[0];
    assertThat(stat.startTimeTicks()).isNotNegative().isEqualTo(Long.parseLong(startField));
  }

  @Property
  void statusParse_arbitraryText_neverThrows(@ForAll String text) {
    int[] pids = StatusParser.parseNsPids(text);
    if (pids != null) {
      assertThat(pids).isNotEmpty();
      assertThat(IntStream.of(pids).allMatch(p -> p > 0)).isTrue();
    }
  }

  /**
   * After an {@code NSpid:} prefix, the parser returns exactly the line's pids when the line is a
   * blank-separated list of 1 to 33 positive pids and no later whole line is a second NSpid line,
   * and null otherwise.
   */
  @Property(tries = 3000)
  void statusParse_anyTextAfterNsPidPrefix_returnsExactlyTheLinesPidsOrNull(
      @ForAll("nsPidTails") String tail) {
    int[] parsed = StatusParser.parseNsPids("Name:\tx\nNSpid:" + tail + "\n");

    assertThat(parsed).isEqualTo(expectedNsPids(tail));
    Statistics.label("parsed").collect(parsed != null);
    Statistics.label("parsed").coverage(c -> c.check(true).percentage(p -> p >= 10));
  }

  @Provide
  Arbitrary<String> nsPidTails() {
    Arbitrary<String> pidLists =
        Arbitraries.integers()
            .between(1, Integer.MAX_VALUE)
            .map(Object::toString)
            .list()
            .ofMinSize(1)
            .ofMaxSize(40)
            .map(l -> "\t" + String.join("\t", l));
    return Arbitraries.oneOf(
        Arbitraries.strings(),
        Arbitraries.strings().withChars("0123456789 \t\n-+").ofMaxLength(60),
        pidLists,
        pidLists.map(l -> l + "\nNSpid:\t1"),
        pidLists.map(l -> l.replaceFirst("\t", "\t0")));
  }

  /** What the NSpid line of {@code "NSpid:" + tail + "\n"} holds, computed independently. */
  private static int[] expectedNsPids(String tail) {
    String[] lines = (tail + "\n").split("\n", -1);
    // lines[last] is the empty remainder after the final newline; lines 1.. are whole lines.
    for (int i = 1; i < lines.length - 1; i++) {
      if (lines[i].startsWith("NSpid:")) {
        return null;
      }
    }
    String line = lines[0].replaceAll("^[ \t]+|[ \t]+$", "");
    if (line.isEmpty()) {
      return null;
    }
    String[] fields = line.split("[ \t]+", -1);
    if (fields.length > 33) {
      return null;
    }
    int[] pids = new int[fields.length];
    for (int i = 0; i < fields.length; i++) {
      if (!fields[i].matches("[0-9]{1,18}")) {
        return null;
      }
      long pid = Long.parseLong(fields[i]);
      if (pid <= 0 || pid > Integer.MAX_VALUE) {
        return null;
      }
      pids[i] = (int) pid;
    }
    return pids;
  }

  // --- round trips ----------------------------------------------------------------------

  @Property
  void statParse_generatedLine_readsBackPidStateAndStartTime(
      @ForAll @IntRange(min = 1) int pid,
      @ForAll @Size(max = 64) String comm,
      @ForAll("states") char state,
      @ForAll @LongRange(min = 0, max = 999_999_999_999_999_999L) long startTime) {
    String line = ProcTree.stat(pid, comm, state, startTime);

    assertThat(StatParser.parse(line)).isEqualTo(new StatParser.Stat(pid, state, startTime));
  }

  @Provide
  Arbitrary<Character> states() {
    return Arbitraries.of('R', 'S', 'D', 'Z', 'T', 't', 'X', 'x', 'I', 'P', 'W', 'K');
  }

  @Property
  void statusParse_generatedFile_readsBackNsPidChain(
      @ForAll @Size(min = 1, max = 32) List<@IntRange(min = 1) Integer> nsPids,
      @ForAll @Size(max = 40) String name) {
    int[] chain = nsPids.stream().mapToInt(Integer::intValue).toArray();
    String escapedName = name.replace("\\", "\\\\").replace("\n", "\\n");

    assertThat(StatusParser.parseNsPids(ProcTree.status(escapedName, chain)))
        .containsExactly(chain);
  }

  @Property
  void uidsParse_arbitraryText_neverThrowsAndGivesOneToFourIds(@ForAll String text) {
    int[] uids = StatusParser.parseUids(text);
    if (uids != null) {
      assertThat(uids.length).isBetween(1, 4);
    }
  }

  @Property
  void uidsParse_generatedFile_readsBackTheUser(
      @ForAll @IntRange(min = 0) int uid,
      @ForAll @Size(min = 1, max = 4) List<@IntRange(min = 1) Integer> nsPids,
      @ForAll @Size(max = 40) String name) {
    int[] chain = nsPids.stream().mapToInt(Integer::intValue).toArray();
    String escapedName = name.replace("\\", "\\\\").replace("\n", "\\n");

    assertThat(StatusParser.parseUids(ProcTree.statusOfUser(escapedName, uid, chain)))
        .containsExactly(uid, uid, uid, uid);
    assertThat(StatusParser.parseUids(ProcTree.statusOfUser(escapedName, -1, chain))).isNull();
  }

  @Property
  void cgroupParse_generatedKubeletPath_readsBackIdentity(@ForAll("kubeletPaths") Rendered r) {
    assertThat(CgroupParser.parse(r.content())).isEqualTo(r.identity());
  }

  @Property
  void normalizePodUid_anySpellingOfAUuid_givesLowercaseDashes(
      @ForAll("uuids") UUID uuid, @ForAll boolean underscores, @ForAll boolean upper) {
    String uid = uuid.toString();
    String spelled = underscores ? uid.replace('-', '_') : uid;
    spelled = upper ? spelled.toUpperCase(Locale.ROOT) : spelled;

    assertThat(CgroupIdentity.normalizePodUid(spelled)).contains(uid);
  }

  @Provide
  Arbitrary<UUID> uuids() {
    return Arbitraries.randomValue(random -> new UUID(random.nextLong(), random.nextLong()));
  }

  /** A cgroup file and the identity it encodes. */
  record Rendered(String content, CgroupIdentity identity) {}

  @Provide
  Arbitrary<Rendered> kubeletPaths() {
    Arbitrary<String> ids = Arbitraries.strings().withChars("0123456789abcdef").ofLength(64);
    return Combinators.combine(
            uuids(),
            ids,
            Arbitraries.of("guaranteed", "burstable", "besteffort"),
            Arbitraries.of("", "containerd", "cri-o", "docker"),
            Arbitraries.of("cgroupfs", "systemd"),
            Arbitraries.of("", "/docker/" + "a".repeat(64), "/kubelet"),
            Arbitraries.of(true, false),
            Arbitraries.of(true, false))
        .as(ParserProperties::render);
  }

  private static Rendered render(
      UUID uuid,
      String cid,
      String qos,
      String runtime,
      String driver,
      String outerPrefix,
      boolean v1,
      boolean podLevel) {
    String uid = uuid.toString();
    boolean systemd = driver.equals("systemd");
    if (systemd && runtime.isEmpty()) {
      runtime = "containerd"; // the systemd driver always names the runtime in the scope
    }
    StringBuilder path = new StringBuilder();
    if (systemd) {
      String base = outerPrefix.equals("/kubelet") ? "kubelet-kubepods" : "kubepods";
      String parent = outerPrefix.equals("/kubelet") ? "/kubelet.slice" : "";
      path.append(parent).append('/').append(base).append(".slice");
      String u = uid.replace('-', '_');
      if (qos.equals("guaranteed")) {
        path.append('/').append(base).append("-pod").append(u).append(".slice");
      } else {
        path.append('/').append(base).append('-').append(qos).append(".slice");
        path.append('/')
            .append(base)
            .append('-')
            .append(qos)
            .append("-pod")
            .append(u)
            .append(".slice");
      }
      if (!podLevel) {
        String prefix =
            switch (runtime) {
              case "containerd" -> "cri-containerd-";
              case "cri-o" -> "crio-";
              default -> "docker-";
            };
        path.append('/').append(prefix).append(cid).append(".scope");
      }
    } else {
      path.append(outerPrefix).append("/kubepods");
      if (!qos.equals("guaranteed")) {
        path.append('/').append(qos);
      }
      path.append("/pod").append(uid);
      if (!podLevel) {
        String prefix =
            switch (runtime) {
              case "containerd" -> "cri-containerd-";
              case "cri-o" -> "crio-";
              case "docker" -> "docker-";
              default -> "";
            };
        path.append('/').append(prefix).append(cid);
      }
    }
    String content =
        v1
            ? "12:pids:" + path + "\n11:rdma:/\n4:memory:" + path + "\n0::/system.slice/x\n"
            : "0::" + path + "\n";
    Optional<String> container = podLevel ? Optional.empty() : Optional.of(cid);
    Optional<String> rt = podLevel || runtime.isEmpty() ? Optional.empty() : Optional.of(runtime);
    return new Rendered(content, CgroupIdentity.kubepods(uid, container, rt, qos));
  }
}
