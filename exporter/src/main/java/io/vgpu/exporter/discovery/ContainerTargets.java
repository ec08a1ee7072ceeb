package io.vgpu.exporter.discovery;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The container directories a one-off reader (the evidence pass, behind the status model, {@code
 * doctor}, {@code inspect} and {@code cleanup}) judges, and the files of each: every directory is
 * read through its one bounded {@link TenantDirListing}, the cap discovery applies, so no reader
 * lists a tenant's directory its own way.
 */
public final class ContainerTargets {
  private ContainerTargets() {}

  /**
   * A container directory to judge: its cache files and side-file names, from the directory's
   * bounded listing (or the files an operator named).
   */
  public record Target(List<Path> files, List<String> sideFiles) {}

  /**
   * Resolves {@code targets} (each a cache root, a {@code <podUID>_<ctr>} directory or one cache
   * file) to container directories, in the order first named, each with its cache files.
   */
  public static Map<Path, Target> resolve(List<Path> targets) {
    Map<Path, Target> dirs = new LinkedHashMap<>();
    for (Path t : targets) {
      resolve(t, dirs);
    }
    return dirs;
  }

  private static void resolve(Path target, Map<Path, Target> out) {
    if (Files.isRegularFile(target, LinkOption.NOFOLLOW_LINKS)) {
      Path dir = target.toAbsolutePath().getParent();
      Target t =
          out.computeIfAbsent(
              dir, k -> new Target(new ArrayList<>(), TenantDirListing.of(k).sideFiles()));
      t.files().add(target.toAbsolutePath());
      return;
    }
    if (!Files.isDirectory(target, LinkOption.NOFOLLOW_LINKS)) {
      return;
    }
    if (ContainerKey.parse(target.getFileName() == null ? "" : target.getFileName().toString())
        .isPresent()) {
      out.putIfAbsent(target.toAbsolutePath(), listed(target.toAbsolutePath()));
      return;
    }
    TreeSet<Path> children = new TreeSet<>();
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(target)) {
      for (Path p : ds) {
        if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)
            && ContainerKey.parse(p.getFileName().toString()).isPresent()) {
          children.add(p);
        }
      }
    } catch (IOException e) {
      return;
    }
    for (Path p : children) {
      out.putIfAbsent(p.toAbsolutePath(), listed(p.toAbsolutePath()));
    }
  }

  /** A container directory as its bounded listing names it (the cap every reader applies). */
  private static Target listed(Path dir) {
    TenantDirListing.Listing l = TenantDirListing.of(dir);
    return new Target(new ArrayList<>(l.cacheFiles()), l.sideFiles());
  }
}
