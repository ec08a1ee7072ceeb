package io.vgpu.exporter.doctor;

import io.vgpu.exporter.node.NodeEvidence;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * Runs the seventeen checks over the node's evidence. Stateless and thread-safe; the status page
 * runs it on every render, the {@code doctor} command once.
 */
public final class Doctor {
  private final List<DoctorCheck> checks;

  public Doctor(List<DoctorCheck> checks) {
    this.checks = List.copyOf(checks);
  }

  /** The seventeen checks, in the order of the debugging guides' leaves. */
  public static Doctor standard() {
    return new Doctor(
        List.of(
            new LibraryNotLoadedCheck(),
            new CacheFileMissingCheck(),
            new VersionMismatchCheck(),
            new MixedLibraryVersionsCheck(),
            new DeadLockHolderCheck(),
            new LongLockHoldCheck(),
            new SlotTableFullCheck(),
            new ZombieSlotsCheck(),
            new HostPidWrongCheck(),
            new MemoryGapCheck(),
            new SmLimitNotEnforcedCheck(),
            new LimiterMisfiringCheck(),
            new NvmlErrorsCheck(),
            new HandshakeStaleCheck(),
            new RegistrationMissingCheck(),
            new LibvgpuDegradedCheck(),
            new UnslottedProcessCheck()));
  }

  public List<DoctorCheck> checks() {
    return checks;
  }

  /** Every check's findings, ordered by check number then subject. */
  public DoctorReport run(NodeEvidence evidence) {
    List<Finding> all = new ArrayList<>();
    for (DoctorCheck check : checks) {
      List<Finding> found;
      try {
        found = check.evaluate(evidence);
      } catch (RuntimeException e) {
        // A check that trips over unexpected evidence must not hide the other sixteen.
        found =
            List.of(
                check.finding(
                    Severity.WARN,
                    Checks.NODE,
                    "check could not run: " + e,
                    List.of(),
                    "Report this as a bug with the evidence (`inspect --json`)."));
      }
      all.addAll(found);
    }
    all.sort(Comparator.comparingInt(Finding::check).thenComparing(Finding::subject));
    return new DoctorReport(evidence.now(), all);
  }
}
