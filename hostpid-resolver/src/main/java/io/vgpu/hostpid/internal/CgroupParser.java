package io.vgpu.hostpid.internal;

import io.vgpu.hostpid.CgroupIdentity;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Reads a pod/container identity out of {@code /proc/<pid>/cgroup}.
 *
 * <p>Every line is {@code hierarchy-id:controllers:path}. Each path is classified on its own as
 * host (no "kubepods" anywhere), a recognised kubelet path, or unknown (mentions kubepods in any
 * other form). The file is a pod only when no line is unknown and every pod line names the same
 * pod, container and QoS class; lines outside kubepods are ignored then, because on v1 and hybrid
 * hosts some hierarchies (rdma, misc, the unified one) legitimately stay at the host's path.
 *
 * <p>Recognised paths, with anything before the kubepods marker allowed (kind, kubelet-in-docker)
 * and anything after the container segment allowed (sub-cgroups the container made itself):
 *
 * <ul>
 *   <li>cgroupfs: {@code .../kubepods[/burstable|/besteffort]/pod<uid>[/<ctr>]} where {@code <ctr>}
 *       is a bare id or {@code crio-}, {@code docker-}, {@code cri-containerd-} + id;
 *   <li>systemd: {@code .../[P-]kubepods.slice[/[P-]kubepods-<qos>.slice]/[P-]kubepods[-<qos>]
 *       -pod<uid>.slice[/<ctr>.scope]} where {@code <ctr>} is {@code cri-containerd-}, {@code
 *       crio-} or {@code docker-} + id; pod UIDs use underscores there.
 * </ul>
 *
 * A runtime helper such as {@code crio-conmon-<id>.scope} is not a container and parses as unknown.
 * Paths relative to the reader's cgroup namespace ({@code /../..}) are read only where systemd
 * slice names make them unambiguous; see {@link #parseRelative}.
 */
public final class CgroupParser {

  private static final String MARKER = "kubepods";
  private static final String SLICE = ".slice";
  private static final String SCOPE = ".scope";

  private CgroupParser() {}

  /** Never throws; see the class comment for what is recognised. */
  public static CgroupIdentity parse(String content) {
    if (content == null || content.isEmpty()) {
      return CgroupIdentity.unknown();
    }
    int end = content.endsWith("\n") ? content.length() - 1 : content.length();
    if (end == 0) {
      return CgroupIdentity.unknown();
    }
    CgroupIdentity pod = null;
    int lineStart = 0;
    while (lineStart <= end) {
      int newline = content.indexOf('\n', lineStart);
      int lineEnd = (newline < 0 || newline > end) ? end : newline;
      CgroupIdentity line = parseLine(content, lineStart, lineEnd);
      switch (line.kind()) {
        case UNKNOWN -> {
          return CgroupIdentity.unknown();
        }
        case KUBEPODS -> {
          if (pod == null) {
            pod = line;
          } else if (!pod.equals(line)) {
            return CgroupIdentity.unknown();
          }
        }
        case HOST -> {}
      }
      lineStart = lineEnd + 1;
    }
    return pod != null ? pod : CgroupIdentity.host();
  }

  /** One {@code id:controllers:path} line; anything malformed is unknown. */
  static CgroupIdentity parseLine(String content, int from, int to) {
    int firstColon = content.indexOf(':', from);
    if (firstColon <= from || firstColon >= to) {
      return CgroupIdentity.unknown();
    }
    for (int i = from; i < firstColon; i++) {
      char c = content.charAt(i);
      if (c < '0' || c > '9') {
        return CgroupIdentity.unknown();
      }
    }
    int secondColon = content.indexOf(':', firstColon + 1);
    if (secondColon < 0 || secondColon >= to) {
      return CgroupIdentity.unknown();
    }
    return classifyPath(content.substring(secondColon + 1, to));
  }

  /** Classifies one cgroup path (starting with '/'). */
  public static CgroupIdentity classifyPath(String path) {
    if (path.isEmpty() || path.charAt(0) != '/') {
      return CgroupIdentity.unknown();
    }
    List<String> segments = split(path);
    if (segments.contains("..")) {
      return parseRelative(segments);
    }
    if (!path.contains(MARKER)) {
      return CgroupIdentity.host();
    }
    int marker = -1;
    for (int i = 0; i < segments.size(); i++) {
      if (isMarker(segments.get(i))) {
        if (marker >= 0) {
          return CgroupIdentity.unknown(); // a kubelet inside a pod: whose pod is it?
        }
        marker = i;
      }
    }
    if (marker < 0) {
      return CgroupIdentity.unknown();
    }
    for (int i = 0; i < marker; i++) {
      if (segments.get(i).contains(MARKER)) {
        return CgroupIdentity.unknown();
      }
    }
    List<String> rest = segments.subList(marker + 1, segments.size());
    String markerSegment = segments.get(marker);
    return markerSegment.equals(MARKER)
        ? parseCgroupfs(rest)
        : parseSystemd(markerSegment.substring(0, markerSegment.length() - SLICE.length()), rest);
  }

  /**
   * A path seen from inside a cgroup namespace (the reader is not in the host's): it climbs out of
   * the reader's root with {@code ..} segments and so hides every name above the common ancestor.
   * Only systemd slice names survive that, because each one spells out its whole ancestry ({@code
   * kubepods-burstable-pod<uid>.slice} can only live in {@code kubepods-burstable.slice} in {@code
   * kubepods.slice}). Anything else, cgroupfs paths included, is unknown, never host.
   */
  private static CgroupIdentity parseRelative(List<String> segments) {
    int first = 0;
    while (first < segments.size() && segments.get(first).equals("..")) {
      first++;
    }
    List<String> rest = segments.subList(first, segments.size());
    if (rest.isEmpty() || rest.contains("..")) {
      return CgroupIdentity.unknown();
    }
    String top = rest.getFirst();
    int at = top.indexOf(MARKER);
    if (!top.endsWith(SLICE) || at < 0 || top.indexOf(MARKER, at + 1) >= 0) {
      return CgroupIdentity.unknown();
    }
    if (at > 0 && top.charAt(at - 1) != '-') {
      return CgroupIdentity.unknown();
    }
    String base = top.substring(0, at + MARKER.length());
    for (String segment : rest.subList(1, rest.size())) {
      if (segment.contains(MARKER) && !segment.startsWith(base + "-")) {
        return CgroupIdentity.unknown();
      }
    }
    if (top.equals(base + SLICE)) {
      return parseSystemd(base, rest.subList(1, rest.size()));
    }
    for (String qos : List.of(CgroupIdentity.QOS_BURSTABLE, CgroupIdentity.QOS_BESTEFFORT)) {
      if (top.startsWith(base + "-" + qos + "-pod")) {
        List<String> withParent = new ArrayList<>(rest.size() + 1);
        withParent.add(base + "-" + qos + SLICE);
        withParent.addAll(rest);
        return parseSystemd(base, withParent);
      }
    }
    return parseSystemd(base, rest); // starts at the QoS slice or a guaranteed pod slice
  }

  private static boolean isMarker(String segment) {
    return segment.equals(MARKER)
        || segment.equals(MARKER + SLICE)
        || (segment.endsWith("-" + MARKER + SLICE) && segment.length() > MARKER.length() + 7);
  }

  /** After {@code kubepods}: {@code [qos/]pod<uid>[/<ctr>[/...]]}. */
  private static CgroupIdentity parseCgroupfs(List<String> rest) {
    int i = 0;
    String qos = CgroupIdentity.QOS_GUARANTEED;
    if (i < rest.size() && isQosName(rest.get(i))) {
      qos = rest.get(i++);
    }
    if (i >= rest.size() || !rest.get(i).startsWith("pod")) {
      return CgroupIdentity.unknown();
    }
    Optional<String> uid = Ids.normalizePodUid(rest.get(i).substring(3));
    if (uid.isEmpty()) {
      return CgroupIdentity.unknown();
    }
    i++;
    if (i >= rest.size()) {
      return CgroupIdentity.kubepods(uid.get(), Optional.empty(), Optional.empty(), qos);
    }
    String container = rest.get(i);
    String runtime;
    int idStart;
    if (container.startsWith("cri-containerd-")) {
      runtime = CgroupIdentity.RUNTIME_CONTAINERD;
      idStart = "cri-containerd-".length();
    } else if (container.startsWith("crio-")) {
      runtime = CgroupIdentity.RUNTIME_CRIO;
      idStart = "crio-".length();
    } else if (container.startsWith("docker-")) {
      runtime = CgroupIdentity.RUNTIME_DOCKER;
      idStart = "docker-".length();
    } else {
      runtime = null;
      idStart = 0;
    }
    if (!Ids.isContainerId(container, idStart, container.length())) {
      return CgroupIdentity.unknown();
    }
    return CgroupIdentity.kubepods(
        uid.get(), Optional.of(container.substring(idStart)), Optional.ofNullable(runtime), qos);
  }

  /**
   * After {@code <base>.slice} (base is {@code kubepods} or {@code <prefix>-kubepods}): the systemd
   * slice chain must nest exactly as systemd names it.
   */
  private static CgroupIdentity parseSystemd(String base, List<String> rest) {
    int i = 0;
    String qos = CgroupIdentity.QOS_GUARANTEED;
    String podPrefix = base + "-pod";
    if (i < rest.size()) {
      for (String q : List.of(CgroupIdentity.QOS_BURSTABLE, CgroupIdentity.QOS_BESTEFFORT)) {
        if (rest.get(i).equals(base + "-" + q + SLICE)) {
          qos = q;
          podPrefix = base + "-" + q + "-pod";
          i++;
          break;
        }
      }
    }
    if (i >= rest.size()) {
      return CgroupIdentity.unknown();
    }
    String podSlice = rest.get(i);
    if (!podSlice.startsWith(podPrefix) || !podSlice.endsWith(SLICE)) {
      return CgroupIdentity.unknown();
    }
    Optional<String> uid =
        Ids.normalizePodUid(
            podSlice.substring(podPrefix.length(), podSlice.length() - SLICE.length()));
    if (uid.isEmpty()) {
      return CgroupIdentity.unknown();
    }
    i++;
    if (i >= rest.size()) {
      return CgroupIdentity.kubepods(uid.get(), Optional.empty(), Optional.empty(), qos);
    }
    String scope = rest.get(i);
    if (!scope.endsWith(SCOPE)) {
      return CgroupIdentity.unknown();
    }
    int idEnd = scope.length() - SCOPE.length();
    String runtime;
    int idStart;
    if (scope.startsWith("cri-containerd-")) {
      runtime = CgroupIdentity.RUNTIME_CONTAINERD;
      idStart = "cri-containerd-".length();
    } else if (scope.startsWith("crio-")) {
      runtime = CgroupIdentity.RUNTIME_CRIO;
      idStart = "crio-".length();
    } else if (scope.startsWith("docker-")) {
      runtime = CgroupIdentity.RUNTIME_DOCKER;
      idStart = "docker-".length();
    } else {
      return CgroupIdentity.unknown();
    }
    if (!Ids.isContainerId(scope, idStart, idEnd)) {
      return CgroupIdentity.unknown();
    }
    return CgroupIdentity.kubepods(
        uid.get(), Optional.of(scope.substring(idStart, idEnd)), Optional.of(runtime), qos);
  }

  private static boolean isQosName(String segment) {
    return segment.equals(CgroupIdentity.QOS_BURSTABLE)
        || segment.equals(CgroupIdentity.QOS_BESTEFFORT);
  }

  /** Path segments without the leading empty one; empty segments ("//") are kept, and fail. */
  private static List<String> split(String path) {
    List<String> segments = new ArrayList<>(8);
    int start = 1;
    while (start <= path.length()) {
      int slash = path.indexOf('/', start);
      int end = slash < 0 ? path.length() : slash;
      segments.add(path.substring(start, end));
      start = end + 1;
    }
    return segments;
  }
}
