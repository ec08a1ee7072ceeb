package io.vgpu.hostpid.internal;

import java.util.Optional;

/** Pod UID and container id spellings, checked character by character (no regex on hot paths). */
public final class Ids {

  /** Length of a Kubernetes UID (8-4-4-4-12). */
  static final int UUID_LENGTH = 36;

  /** Length of a static-pod UID (an md5 hex of the manifest, no separators). */
  static final int HASH_UID_LENGTH = 32;

  /** Length of a containerd, CRI-O or Docker container id. */
  public static final int CONTAINER_ID_LENGTH = 64;

  private Ids() {}

  /**
   * The normalized (lowercase, dash-separated) form of a pod UID written with dashes or, as the
   * systemd cgroup driver does, underscores; or a 32-hex static-pod UID in lowercase. Mixed
   * separators are refused: no kubelet writes them.
   */
  public static Optional<String> normalizePodUid(String uid) {
    if (uid == null) {
      return Optional.empty();
    }
    if (uid.length() == HASH_UID_LENGTH) {
      return isHex(uid, 0, HASH_UID_LENGTH) ? Optional.of(lowerAscii(uid)) : Optional.empty();
    }
    if (uid.length() != UUID_LENGTH) {
      return Optional.empty();
    }
    char separator = uid.charAt(8);
    if (separator != '-' && separator != '_') {
      return Optional.empty();
    }
    char[] out = new char[UUID_LENGTH];
    for (int i = 0; i < UUID_LENGTH; i++) {
      char c = uid.charAt(i);
      if (i == 8 || i == 13 || i == 18 || i == 23) {
        if (c != separator) {
          return Optional.empty();
        }
        out[i] = '-';
      } else {
        int digit = hexValue(c);
        if (digit < 0) {
          return Optional.empty();
        }
        out[i] = Character.forDigit(digit, 16);
      }
    }
    return Optional.of(new String(out));
  }

  /** True for exactly 64 lowercase hex digits. */
  public static boolean isContainerId(String id) {
    return id != null && id.length() == CONTAINER_ID_LENGTH && isLowerHex(id, 0, id.length());
  }

  /** True when {@code s[from, to)} is exactly 64 lowercase hex digits. */
  static boolean isContainerId(String s, int from, int to) {
    return to - from == CONTAINER_ID_LENGTH && isLowerHex(s, from, to);
  }

  /**
   * A container id from the kubelet's status ({@code containerd://<hex>}, {@code cri-o://<hex>},
   * {@code docker://<hex>}) or bare, as bare lowercase hex; empty when it is not one.
   */
  public static Optional<String> normalizeContainerId(String id) {
    if (id == null) {
      return Optional.empty();
    }
    String bare = id;
    int scheme = id.indexOf("://");
    if (scheme >= 0) {
      String prefix = id.substring(0, scheme);
      if (!prefix.equals("containerd") && !prefix.equals("cri-o") && !prefix.equals("docker")) {
        return Optional.empty();
      }
      bare = id.substring(scheme + 3);
    }
    bare = lowerAscii(bare);
    return isContainerId(bare) ? Optional.of(bare) : Optional.empty();
  }

  private static boolean isHex(String s, int from, int to) {
    for (int i = from; i < to; i++) {
      if (hexValue(s.charAt(i)) < 0) {
        return false;
      }
    }
    return true;
  }

  private static boolean isLowerHex(String s, int from, int to) {
    for (int i = from; i < to; i++) {
      char c = s.charAt(i);
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
        return false;
      }
    }
    return true;
  }

  private static int hexValue(char c) {
    if (c >= '0' && c <= '9') {
      return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
      return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
      return c - 'A' + 10;
    }
    return -1;
  }

  private static String lowerAscii(String s) {
    char[] out = new char[s.length()];
    for (int i = 0; i < out.length; i++) {
      char c = s.charAt(i);
      out[i] = (c >= 'A' && c <= 'Z') ? (char) (c + ('a' - 'A')) : c;
    }
    return new String(out);
  }
}
