package io.vgpu.exporter.kubelet;

/** Checks that strings from the kubelet have the shape Kubernetes gives them, before any use. */
final class KubeNames {
  private KubeNames() {}

  /** A DNS-1123 label (namespaces, container names): 1-63 of [a-z0-9-], alphanumeric ends. */
  static boolean label(String s) {
    return s.length() <= 63 && subdomain(s) && s.indexOf('.') < 0;
  }

  /** A DNS-1123 subdomain (pod names): 1-253 of [a-z0-9.-], alphanumeric ends. */
  static boolean subdomain(String s) {
    int n = s.length();
    if (n == 0 || n > 253 || !alnum(s.charAt(0)) || !alnum(s.charAt(n - 1))) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (!alnum(c) && c != '-' && c != '.') {
        return false;
      }
    }
    return true;
  }

  /** An extended resource or DRA driver name: 1-317 of [A-Za-z0-9._/-]. */
  static boolean resource(String s) {
    int n = s.length();
    if (n == 0 || n > 317) {
      return false;
    }
    for (int i = 0; i < n; i++) {
      char c = s.charAt(i);
      if (!alnum(Character.toLowerCase(c)) && c != '-' && c != '.' && c != '_' && c != '/') {
        return false;
      }
    }
    return true;
  }

  /** Resources whose ids must be GPU ids: an id of another shape there is counted as rejected. */
  static boolean gpuResource(String resource) {
    String r = resource.toLowerCase(java.util.Locale.ROOT);
    return r.startsWith("nvidia.com/") || r.contains("gpu") || r.contains("hami");
  }

  private static boolean alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
  }
}
