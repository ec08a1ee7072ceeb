package io.vgpu.exporter.discovery;

import java.util.Locale;
import java.util.Objects;
import java.util.Optional;

/**
 * A container as HAMi's device plugin names its cache directory: {@code <podUID>_<containerName>},
 * split on the first underscore (pod UIDs contain none, container names may).
 *
 * @param podUid lower-case pod UID
 * @param containerName the container name from the pod spec
 */
public record ContainerKey(String podUid, String containerName)
    implements Comparable<ContainerKey> {
  public ContainerKey {
    Objects.requireNonNull(podUid, "podUid");
    Objects.requireNonNull(containerName, "containerName");
    if (podUid.isEmpty() || containerName.isEmpty()) {
      throw new IllegalArgumentException("pod UID and container name must not be empty");
    }
    podUid = podUid.toLowerCase(Locale.ROOT);
  }

  /** Parses a directory name; empty when it does not have the {@code <uid>_<name>} shape. */
  public static Optional<ContainerKey> parse(String dirName) {
    int sep = dirName.indexOf('_');
    if (sep <= 0 || sep == dirName.length() - 1) {
      return Optional.empty();
    }
    String uid = dirName.substring(0, sep);
    for (int i = 0; i < uid.length(); i++) {
      char c = uid.charAt(i);
      if (!(Character.isLetterOrDigit(c) || c == '-') || c > 127) {
        return Optional.empty();
      }
    }
    return Optional.of(new ContainerKey(uid, dirName.substring(sep + 1)));
  }

  /** The directory name this key was parsed from. */
  public String dirName() {
    return podUid + "_" + containerName;
  }

  /*
   * equals and hashCode are written out: a record's generated ones go through method handles
   * (ObjectMethods), which the exporter's C1-only JIT does not inline, and a scrape looks up
   * thousands of keys (label sets per container and device). Same contract as the record's.
   */
  @Override
  public boolean equals(Object o) {
    return this == o
        || (o instanceof ContainerKey k
            && podUid.equals(k.podUid)
            && containerName.equals(k.containerName));
  }

  @Override
  public int hashCode() {
    return 31 * podUid.hashCode() + containerName.hashCode();
  }

  @Override
  public int compareTo(ContainerKey o) {
    int c = podUid.compareTo(o.podUid);
    return c != 0 ? c : containerName.compareTo(o.containerName);
  }
}
