package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;

import io.vgpu.hostpid.internal.CgroupParser;
import io.vgpu.hostpid.internal.StatParser;
import io.vgpu.hostpid.internal.StatusParser;
import io.vgpu.hostpid.testing.ProcTree;
import java.nio.charset.StandardCharsets;
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
  void statParse_arbitraryText_neverThrows(@ForAll String text) {
    StatParser.Stat stat = StatParser.parse(text);
    if (stat != null) {
      assertThat(stat.pid()).isPositive();
      assertThat(stat.startTimeTicks()).isNotNegative();
    }
  }

  @Property
  void statParse_arbitraryBytes_neverThrows(@ForAll @Size(max = 400) byte[] bytes) {
    StatParser.parse(new String(bytes, StandardCharsets.ISO_8859_1));
  }

  @Property
  void statusParse_arbitraryText_neverThrows(@ForAll String text) {
    int[] pids = StatusParser.parseNsPids(text);
    if (pids != null) {
      assertThat(pids).isNotEmpty();
      assertThat(IntStream.of(pids).allMatch(p -> p > 0)).isTrue();
    }
  }

  @Property
  void statusParse_arbitraryTextAfterNsPidPrefix_neverThrows(@ForAll String tail) {
    StatusParser.parseNsPids("Name:\tx\nNSpid:" + tail + "\n");
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
