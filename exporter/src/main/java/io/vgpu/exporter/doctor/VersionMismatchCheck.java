package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.List;

/**
 * 3: a region that cannot be read (unsupported version, unknown size, bad magic, ...) or whose
 * layout or major/minor version differs from what current libraries write. An unreadable region is
 * a FAIL with the codec's reason, the same reason {@code vgpu_container_region_unreadable} carries:
 * its limits and usage are invisible to the exporter.
 */
final class VersionMismatchCheck implements DoctorCheck {
  @Override
  public int number() {
    return 3;
  }

  @Override
  public String id() {
    return "region-version";
  }

  @Override
  public String title() {
    return "region readable and its version matches the library ("
        + Checks.EXPECTED_MAJOR_MINOR
        + ")";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
    for (NodeEvidence.Container c : e.containers()) {
      for (NodeEvidence.Region r : c.regions()) {
        r.unreadableReason()
            .ifPresent(
                reason ->
                    out.add(
                        finding(
                            Severity.FAIL,
                            Checks.container(c),
                            "region cannot be read: " + reason,
                            List.of(r.path() + ": " + r.error().orElse(reason)),
                            unreadableFix(reason, c, r))));
      }
    }
    Checks.eachRegion(
        e,
        (c, r) -> {
          RegionSnapshot s = Checks.latest(r);
          List<String> ev = List.of(Checks.describe(r));
          String subject = Checks.container(c);
          String recreate =
              "Upgrade libvgpu/HAMi-core in the image or the device plugin so every component writes v1.2, then delete the cache file and restart the container's processes (the first process recreates it).";
          if (s.layout() == Layout.V1_1_BROKEN) {
            out.add(
                finding(
                    Severity.FAIL,
                    subject,
                    "the region uses the mislabelled v1.1-broken layout (says 1.1, is not)",
                    ev,
                    "HAMi-core builds from March-April 2026 wrote this layout; HAMi's monitor misreads it. "
                        + recreate));
          } else if (!s.layout().hasVersionFields()) {
            out.add(
                finding(
                    Severity.WARN,
                    subject,
                    "pre-1.1 region layout " + s.layout().label() + " (no version fields)",
                    ev,
                    recreate));
          } else if (s.majorVersion() != 1) {
            out.add(
                finding(
                    Severity.FAIL,
                    subject,
                    "region major version " + s.majorVersion() + " is incompatible",
                    ev,
                    recreate));
          } else if (s.minorVersion() != 2) {
            out.add(
                finding(
                    Severity.WARN,
                    subject,
                    "region minor version "
                        + s.minorVersion()
                        + " differs from 2 (compatible, but without the per-slot seqlock)",
                    ev,
                    recreate));
          } else {
            out.add(ok(subject, "v1.2", ev));
          }
        });
    return Checks.orSkip(this, out, "no regions");
  }

  /** What to do about a file the codec cannot read, by its reason. */
  static String unreadableFix(String reason, NodeEvidence.Container c, NodeEvidence.Region r) {
    String file = Checks.shellWord(r.path().toString(), "FILE");
    String look =
        " See what it holds with "
            + Checks.inExporterPod("inspect " + file)
            + " or `shrreg-tool --inspect --host --file "
            + file
            + "` the same way"
            + (file.equals("FILE") ? " (FILE: the path above, quoted)." : ".");
    return switch (reason) {
      case "unknown_version", "unknown_size" ->
          "A library version this exporter does not know wrote it (the file's version fields or"
              + " size match no supported layout: 1.0, 1.1, 1.2). Make every component in the"
              + " image and the device plugin write v1.2 (or upgrade the exporter if the library is"
              + " newer), then delete the file and restart the container's processes; the first"
              + " one recreates it."
              + look;
      case "bad_magic", "too_small" ->
          "Not a HAMi-core/libvgpu region (wrong magic or too short): something else wrote a"
              + " *.cache file into "
              + c.dir()
              + ". Remove it; the container's limits live in its real region."
              + look;
      case "permission_denied" ->
          "The exporter may not read it: the cache root must be readable by the exporter's user"
              + " (the chart's modes run as uid 65534 or 0; check the file's mode).";
      case "symlink", "not_regular_file", "hard_link", "wrong_owner" ->
          "Not a plain file of the container ("
              + reason
              + "): regions are never read through"
              + " links or special files. Remove it and restart the container's processes.";
      default -> "The file could not be read (" + reason + "); it is retried on every pass." + look;
    };
  }
}
