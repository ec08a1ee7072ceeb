package io.vgpu.exporter.reliability;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Map;
import java.util.TreeMap;

/** What a directory tree holds: every entry with its type, mode, mtime and content digest. */
final class Snapshots {
  private Snapshots() {}

  static Map<String, String> tree(Path root) throws IOException {
    Map<String, String> out = new TreeMap<>();
    try (var walk = Files.walk(root)) {
      for (Path p : walk.toList()) {
        String rel = root.relativize(p).toString();
        var attrs =
            Files.readAttributes(p, "unix:mode,lastModifiedTime,size", LinkOption.NOFOLLOW_LINKS);
        String what = attrs.toString();
        if (Files.isRegularFile(p, LinkOption.NOFOLLOW_LINKS)) {
          what += " sha256=" + sha256(p);
        }
        out.put(rel, what);
      }
    }
    return out;
  }

  private static String sha256(Path p) throws IOException {
    try {
      MessageDigest md = MessageDigest.getInstance("SHA-256");
      return HexFormat.of().formatHex(md.digest(Files.readAllBytes(p)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }
}
