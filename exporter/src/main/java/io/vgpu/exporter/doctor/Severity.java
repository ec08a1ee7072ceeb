package io.vgpu.exporter.doctor;

/** How bad a doctor finding is; the command's exit code is the worst one's. */
public enum Severity {
  /** Checked and fine. */
  OK(0),
  /** Not applicable here, or the data to decide was not available. */
  SKIP(0),
  /** Degraded or suspicious; works but needs attention. */
  WARN(1),
  /** Broken: limits, accounting or scheduling are wrong until fixed. */
  FAIL(2);

  private final int exitCode;

  Severity(int exitCode) {
    this.exitCode = exitCode;
  }

  public int exitCode() {
    return exitCode;
  }

  public String label() {
    return name().toLowerCase(java.util.Locale.ROOT);
  }
}
