package io.vgpu.hostpid;

/**
 * What the last full scan of the procfs root saw; for self-metrics and debugging.
 *
 * @param scans completed scans since the resolver was built
 * @param processes processes indexed (read consistently), pod or not
 * @param podProcesses of those, processes whose cgroup names a pod
 * @param unknownCgroup processes whose cgroup mentions kubepods in a form not recognised
 * @param gone pids listed but exited before they could be read
 * @param unusable pids whose files were malformed, too large or unreadable
 * @param cacheHits processes whose (pid, start time) was already cached: only {@code stat} read
 * @param cacheMisses processes read in full ({@code stat}, {@code status}, {@code cgroup})
 * @param durationNanos how long the scan took, by the resolver's ticker
 */
public record ScanStats(
    long scans,
    int processes,
    int podProcesses,
    int unknownCgroup,
    int gone,
    int unusable,
    int cacheHits,
    int cacheMisses,
    long durationNanos) {

  public static final ScanStats NONE = new ScanStats(0, 0, 0, 0, 0, 0, 0, 0, 0);
}
