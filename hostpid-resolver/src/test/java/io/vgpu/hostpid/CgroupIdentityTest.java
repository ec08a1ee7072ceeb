package io.vgpu.hostpid;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vgpu.hostpid.CgroupIdentity.Kind;
import io.vgpu.hostpid.internal.CgroupParser;
import java.util.Locale;
import java.util.Optional;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class CgroupIdentityTest {

  private static final String UID = "0f8b2a51-9c3e-4d7a-8b21-5e6f7a8b9c0d";
  private static final String UID_ = UID.replace('-', '_');
  private static final String CID =
      "4e50fa499b911da69945479da4c162ac646409b7e8d7352eb75aef571ade1b7b";

  static Stream<Arguments> recognisedPaths() {
    return Stream.of(
        Arguments.of(
            "v1 cgroupfs besteffort, bare id",
            "/kubepods/besteffort/pod" + UID + "/" + CID,
            CID,
            null,
            "besteffort"),
        Arguments.of(
            "v1 cgroupfs burstable, cri-o",
            "/kubepods/burstable/pod" + UID + "/crio-" + CID,
            CID,
            "cri-o",
            "burstable"),
        Arguments.of(
            "cgroupfs guaranteed (no QoS level)",
            "/kubepods/pod" + UID + "/" + CID,
            CID,
            null,
            "guaranteed"),
        Arguments.of(
            "cgroupfs docker- prefix",
            "/kubepods/pod" + UID + "/docker-" + CID,
            CID,
            "docker",
            "guaranteed"),
        Arguments.of(
            "systemd burstable containerd",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
                + UID_
                + ".slice/cri-containerd-"
                + CID
                + ".scope",
            CID,
            "containerd",
            "burstable"),
        Arguments.of(
            "systemd besteffort cri-o",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod"
                + UID_
                + ".slice/crio-"
                + CID
                + ".scope",
            CID,
            "cri-o",
            "besteffort"),
        Arguments.of(
            "systemd guaranteed docker",
            "/kubepods.slice/kubepods-pod" + UID_ + ".slice/docker-" + CID + ".scope",
            CID,
            "docker",
            "guaranteed"),
        Arguments.of(
            "systemd pod UID written with dashes",
            "/kubepods.slice/kubepods-pod" + UID + ".slice/docker-" + CID + ".scope",
            CID,
            "docker",
            "guaranteed"),
        Arguments.of(
            "kubelet-prefixed slices (kind)",
            "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
                + "kubelet-kubepods-burstable-pod"
                + UID_
                + ".slice/cri-containerd-"
                + CID
                + ".scope",
            CID,
            "containerd",
            "burstable"),
        Arguments.of(
            "cgroupfs below a docker container (kind)",
            "/docker/" + CID + "/kubepods/besteffort/pod" + UID + "/" + CID,
            CID,
            null,
            "besteffort"),
        Arguments.of(
            "sub-cgroup the container made",
            "/kubepods/besteffort/pod" + UID + "/" + CID + "/init.scope",
            CID,
            null,
            "besteffort"),
        Arguments.of(
            "process in the pod cgroup itself",
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + UID_ + ".slice",
            null,
            null,
            "besteffort"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("recognisedPaths")
  void parse_recognisedPath_returnsPodAndContainer(
      String name, String path, String containerId, String runtime, String qos) {
    for (String content : new String[] {"0::" + path + "\n", v1(path, "/")}) {
      CgroupIdentity identity = CgroupParser.parse(content);

      assertThat(identity.kind()).as(content).isEqualTo(Kind.KUBEPODS);
      assertThat(identity.podUid()).contains(UID);
      assertThat(identity.containerId()).isEqualTo(Optional.ofNullable(containerId));
      assertThat(identity.runtime()).isEqualTo(Optional.ofNullable(runtime));
      assertThat(identity.qosClass()).contains(qos);
    }
  }

  static Stream<Arguments> unknownPaths() {
    return Stream.of(
        Arguments.of("pod UID not a UID", "/kubepods/besteffort/podxyz/" + CID),
        Arguments.of("mixed separators", "/kubepods/pod" + UID.replaceFirst("-", "_") + "/" + CID),
        Arguments.of("short container id", "/kubepods/pod" + UID + "/" + CID.substring(0, 12)),
        Arguments.of(
            "uppercase container id", "/kubepods/pod" + UID + "/" + CID.toUpperCase(Locale.ROOT)),
        Arguments.of("unknown QoS", "/kubepods/guaranteed/pod" + UID + "/" + CID),
        Arguments.of("marker only", "/kubepods"),
        Arguments.of("QoS level only", "/kubepods/burstable"),
        Arguments.of("trailing slash", "/kubepods/pod" + UID + "/"),
        Arguments.of(
            "slice without its parent",
            "/kubepods-burstable.slice/kubepods-burstable-pod" + UID_ + ".slice"),
        Arguments.of(
            "QoS of the pod slice differs from its parent",
            "/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" + UID_ + ".slice"),
        Arguments.of(
            "scope without runtime prefix",
            "/kubepods.slice/kubepods-pod" + UID_ + ".slice/" + CID + ".scope"),
        Arguments.of(
            "conmon is not a container",
            "/kubepods.slice/kubepods-pod" + UID_ + ".slice/crio-conmon-" + CID + ".scope"),
        Arguments.of(
            "removed cgroup",
            "/kubepods.slice/kubepods-pod" + UID_ + ".slice/crio-" + CID + ".scope (deleted)"),
        Arguments.of(
            "kubelet inside a pod",
            "/kubepods/pod" + UID + "/" + CID + "/kubepods/besteffort/pod" + UID + "/" + CID),
        Arguments.of("kubepods word inside a segment", "/my-kubepods-thing/x"),
        Arguments.of("relative path", "kubepods/pod" + UID + "/" + CID));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("unknownPaths")
  void parse_unrecognisedKubepodsPath_returnsUnknown(String name, String path) {
    assertThat(CgroupParser.parse("0::" + path + "\n")).isEqualTo(CgroupIdentity.unknown());
    assertThat(CgroupParser.parse(v1(path, "/"))).isEqualTo(CgroupIdentity.unknown());
  }

  static Stream<Arguments> relativeSystemdPaths() {
    String scope = "/cri-containerd-" + CID + ".scope";
    return Stream.of(
        Arguments.of(
            "common ancestor is the root's child",
            "/../../../kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
                + UID_
                + ".slice"
                + scope,
            "burstable"),
        Arguments.of(
            "common ancestor is kubepods.slice",
            "/../../../kubepods-burstable.slice/kubepods-burstable-pod" + UID_ + ".slice" + scope,
            "burstable"),
        Arguments.of(
            "common ancestor is the QoS slice",
            "/../../kubepods-besteffort-pod" + UID_ + ".slice" + scope,
            "besteffort"),
        Arguments.of(
            "guaranteed pod seen from a burstable one",
            "/../../../kubepods-pod" + UID_ + ".slice" + scope,
            "guaranteed"),
        Arguments.of(
            "kubelet-prefixed slices",
            "/../../kubelet-kubepods-besteffort-pod" + UID_ + ".slice" + scope,
            "besteffort"));
  }

  /** Seen from inside a cgroup namespace, systemd slice names still say where they are. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("relativeSystemdPaths")
  void parse_relativeSystemdPath_returnsPod(String name, String path, String qos) {
    CgroupIdentity identity = CgroupParser.parse("0::" + path + "\n");

    assertThat(identity)
        .isEqualTo(CgroupIdentity.kubepods(UID, Optional.of(CID), Optional.of("containerd"), qos));
  }

  /** Relative cgroupfs paths, or host paths, hide whether kubepods is above them: unknown. */
  @Test
  void parse_relativePathWithoutSelfDescribingSlices_returnsUnknown() {
    String[] paths = {
      "/../../../burstable/pod" + UID + "/" + CID,
      "/../../pod" + UID + "/" + CID,
      "/../cri-containerd-" + CID + ".scope",
      "/../../../system.slice/containerd.service",
      "/..",
      "/../",
      "/../kubepods-burstable-pod" + UID_ + ".slice/../x",
      "/../../kubepods-besteffort-pod" + UID_ + ".slice/kubepods-burstable-pod" + UID_ + ".slice",
      "/../mykubepods-besteffort-pod" + UID_ + ".slice/cri-containerd-" + CID + ".scope",
      "/a/../kubepods.slice",
    };
    for (String path : paths) {
      assertThat(CgroupParser.parse("0::" + path + "\n"))
          .as(path)
          .isEqualTo(CgroupIdentity.unknown());
    }
  }

  @Test
  void parse_hostPaths_returnsHost() {
    assertThat(CgroupParser.parse("0::/\n")).isEqualTo(CgroupIdentity.host());
    assertThat(CgroupParser.parse("0::/system.slice/containerd.service\n").kind())
        .isEqualTo(Kind.HOST);
    assertThat(CgroupParser.parse(v1("/user.slice/user-0.slice/session-1.scope", "/")).kind())
        .isEqualTo(Kind.HOST);
    assertThat(CgroupParser.parse("0::/docker/" + CID + "\n").kind()).isEqualTo(Kind.HOST);
    assertThat(CgroupParser.parse("0::/\n12:pids:/\n").kind()).isEqualTo(Kind.HOST);
  }

  @Test
  void parse_hybridWithUnifiedLineAtServicePath_takesThePodFromV1Lines() {
    String content = v1("/kubepods/pod" + UID + "/" + CID, "/system.slice/containerd.service");

    assertThat(CgroupParser.parse(content).containerId()).contains(CID);
  }

  @Test
  void parse_hierarchiesNamingDifferentPods_returnsUnknown() {
    String other = "11111111-2222-4333-8444-555555555555";
    String content =
        "2:pids:/kubepods/pod"
            + UID
            + "/"
            + CID
            + "\n1:cpu:/kubepods/pod"
            + other
            + "/"
            + CID
            + "\n";

    assertThat(CgroupParser.parse(content)).isEqualTo(CgroupIdentity.unknown());
  }

  @Test
  void parse_hierarchiesNamingDifferentContainers_returnsUnknown() {
    String cid2 = "a".repeat(64);
    String content =
        "2:pids:/kubepods/pod"
            + UID
            + "/"
            + CID
            + "\n1:cpu:/kubepods/pod"
            + UID
            + "/"
            + cid2
            + "\n";

    assertThat(CgroupParser.parse(content)).isEqualTo(CgroupIdentity.unknown());
  }

  @Test
  void parse_malformedFiles_returnUnknown() {
    for (String content :
        new String[] {
          "", "\n", "garbage\n", "0:/\n", "x::/\n", "0::/\n\n0::/\n", "::/kubepods\n", null
        }) {
      assertThat(CgroupParser.parse(content))
          .as(String.valueOf(content))
          .isEqualTo(CgroupIdentity.unknown());
    }
  }

  @Test
  void parse_missingFinalNewline_stillParses() {
    assertThat(CgroupParser.parse("0::/kubepods/pod" + UID + "/" + CID).containerId())
        .contains(CID);
  }

  @Test
  void normalizePodUid_spellings_giveLowercaseDashes() {
    assertThat(CgroupIdentity.normalizePodUid(UID_)).contains(UID);
    assertThat(CgroupIdentity.normalizePodUid(UID.toUpperCase(Locale.ROOT))).contains(UID);
    assertThat(CgroupIdentity.normalizePodUid("0123456789ABCDEF0123456789abcdef"))
        .contains("0123456789abcdef0123456789abcdef");
    assertThat(CgroupIdentity.normalizePodUid(UID.substring(1))).isEmpty();
    assertThat(CgroupIdentity.normalizePodUid(UID.replace('0', 'g'))).isEmpty();
    assertThat(CgroupIdentity.normalizePodUid(UID.replace('-', '.'))).isEmpty();
    assertThat(CgroupIdentity.normalizePodUid(null)).isEmpty();
  }

  @Test
  void normalizeContainerId_kubeletSpellings_giveBareHex() {
    assertThat(CgroupIdentity.normalizeContainerId("containerd://" + CID)).contains(CID);
    assertThat(CgroupIdentity.normalizeContainerId("cri-o://" + CID)).contains(CID);
    assertThat(CgroupIdentity.normalizeContainerId("docker://" + CID.toUpperCase(Locale.ROOT)))
        .contains(CID);
    assertThat(CgroupIdentity.normalizeContainerId(CID)).contains(CID);
    assertThat(CgroupIdentity.normalizeContainerId("rkt://" + CID)).isEmpty();
    assertThat(CgroupIdentity.normalizeContainerId(CID.substring(2))).isEmpty();
    assertThat(CgroupIdentity.normalizeContainerId(null)).isEmpty();
  }

  @Test
  void constructor_inconsistentFields_throws() {
    assertThatThrownBy(
            () ->
                new CgroupIdentity(
                    Kind.HOST,
                    Optional.of(UID),
                    Optional.empty(),
                    Optional.empty(),
                    Optional.empty()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () ->
                new CgroupIdentity(
                    Kind.KUBEPODS,
                    Optional.of(UID_),
                    Optional.empty(),
                    Optional.empty(),
                    Optional.of("burstable")))
        .hasMessageContaining("normalized");
    assertThatThrownBy(
            () -> CgroupIdentity.kubepods(UID, Optional.of("xyz"), Optional.empty(), "burstable"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () -> CgroupIdentity.kubepods(UID, Optional.of(CID), Optional.empty(), "gold"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private static String v1(String path, String unified) {
    return "9:name=systemd:"
        + path
        + "\n8:pids:"
        + path
        + "\n4:memory:"
        + path
        + "\n11:rdma:/\n1:cpu:"
        + path
        + "\n0::"
        + unified
        + "\n";
  }
}
