package io.vgpu.hostpid;

import io.vgpu.hostpid.internal.Ids;
import java.util.Optional;

/**
 * The Kubernetes identity a process's cgroup membership proves, or the honest absence of one.
 *
 * @param kind {@link Kind#KUBEPODS} when the cgroup path is a recognised kubelet pod path, {@link
 *     Kind#HOST} when no path mentions kubepods (host daemons, kernel threads, non-Kubernetes
 *     containers), {@link Kind#UNKNOWN} when it mentions kubepods in a form we do not recognise,
 *     the hierarchies disagree, or the file could not be read
 * @param podUid normalized pod UID (lowercase, dashes), present exactly for {@code KUBEPODS}
 * @param containerId bare lowercase hex container id (runtime prefix and {@code .scope} stripped);
 *     empty when the process sits in the pod cgroup itself
 * @param runtime "containerd", "cri-o" or "docker" when the path names the runtime; empty for bare
 *     ids (cgroupfs containerd or cri-dockerd)
 * @param qosClass {@code guaranteed}, {@code burstable} or {@code besteffort}, for {@code KUBEPODS}
 */
public record CgroupIdentity(
    Kind kind,
    Optional<String> podUid,
    Optional<String> containerId,
    Optional<String> runtime,
    Optional<String> qosClass) {

  /** Where the process's cgroup places it. */
  public enum Kind {
    KUBEPODS,
    UNKNOWN,
    HOST
  }

  public static final String RUNTIME_CONTAINERD = "containerd";
  public static final String RUNTIME_CRIO = "cri-o";
  public static final String RUNTIME_DOCKER = "docker";
  public static final String QOS_GUARANTEED = "guaranteed";
  public static final String QOS_BURSTABLE = "burstable";
  public static final String QOS_BESTEFFORT = "besteffort";

  private static final CgroupIdentity HOST_IDENTITY =
      new CgroupIdentity(
          Kind.HOST, Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty());
  private static final CgroupIdentity UNKNOWN_IDENTITY =
      new CgroupIdentity(
          Kind.UNKNOWN, Optional.empty(), Optional.empty(), Optional.empty(), Optional.empty());

  public CgroupIdentity {
    if (kind == null || podUid == null || containerId == null || runtime == null) {
      throw new IllegalArgumentException("kind and optionals must not be null");
    }
    if (qosClass == null) {
      throw new IllegalArgumentException("qosClass must not be null (use Optional.empty())");
    }
    if (kind == Kind.KUBEPODS) {
      if (podUid.isEmpty() || qosClass.isEmpty()) {
        throw new IllegalArgumentException("a KUBEPODS identity needs a pod UID and a QoS class");
      }
      if (!Ids.normalizePodUid(podUid.get()).equals(podUid)) {
        throw new IllegalArgumentException("pod UID must be normalized, got " + podUid.get());
      }
      if (containerId.isPresent() && !Ids.isContainerId(containerId.get())) {
        throw new IllegalArgumentException("container id must be bare hex, got " + containerId);
      }
      String qos = qosClass.get();
      if (!qos.equals(QOS_GUARANTEED)
          && !qos.equals(QOS_BURSTABLE)
          && !qos.equals(QOS_BESTEFFORT)) {
        throw new IllegalArgumentException("unknown QoS class " + qos);
      }
      if (runtime.isPresent() && containerId.isEmpty()) {
        throw new IllegalArgumentException("a runtime needs a container id");
      }
    } else if (podUid.isPresent()
        || containerId.isPresent()
        || runtime.isPresent()
        || qosClass.isPresent()) {
      throw new IllegalArgumentException(kind + " identities carry no pod/container fields");
    }
  }

  /** A process outside every Kubernetes pod cgroup. */
  public static CgroupIdentity host() {
    return HOST_IDENTITY;
  }

  /** A process whose pod membership cannot be told (unknown format, conflict, unreadable). */
  public static CgroupIdentity unknown() {
    return UNKNOWN_IDENTITY;
  }

  /** A process in a pod; {@code podUid} is normalized here, so either spelling may be passed. */
  public static CgroupIdentity kubepods(
      String podUid, Optional<String> containerId, Optional<String> runtime, String qosClass) {
    String uid =
        Ids.normalizePodUid(podUid)
            .orElseThrow(() -> new IllegalArgumentException("not a pod UID: " + podUid));
    return new CgroupIdentity(
        Kind.KUBEPODS, Optional.of(uid), containerId, runtime, Optional.of(qosClass));
  }

  /**
   * Normalizes a pod UID as written by Kubernetes ({@code 1b4e...-...}), by the systemd driver
   * ({@code 1b4e..._...}) or a static-pod hash (32 hex): lowercase, dashes. Empty when it is none.
   */
  public static Optional<String> normalizePodUid(String podUid) {
    return Ids.normalizePodUid(podUid);
  }

  /**
   * Normalizes a container id as reported by the kubelet ({@code containerd://<hex>}, {@code
   * cri-o://<hex>}, {@code docker://<hex>}) or bare: lowercase hex. Empty when it is none.
   */
  public static Optional<String> normalizeContainerId(String containerId) {
    return Ids.normalizeContainerId(containerId);
  }

  public boolean isPod() {
    return kind == Kind.KUBEPODS;
  }
}
