package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import io.vgpu.regioncodec.Layout;
import io.vgpu.regioncodec.RegionSnapshot;
import java.util.ArrayList;
import java.util.List;

/** 3: a region whose layout or major/minor version differs from what current libraries write. */
public final class VersionMismatchCheck implements DoctorCheck {
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
    return "region version matches the library (" + Checks.EXPECTED_MAJOR_MINOR + ")";
  }

  @Override
  public List<Finding> evaluate(NodeEvidence e) {
    List<Finding> out = new ArrayList<>();
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
    return Checks.orSkip(this, out, "no readable regions");
  }
}
