package io.vgpu.exporter.node;

/**
 * One container's use of one device, summed over its cache files and counted slots.
 *
 * @param index device index as the container sees it (HAMi's vdevice index)
 * @param uuid device UUID ("" when the region has none)
 * @param usedBytes sum of {@code used[i].total} over slots the judgment does not call GONE
 * @param limitBytes memory limit (largest over files)
 * @param contextBytes sum of context sizes
 * @param moduleBytes sum of module sizes
 * @param dataBytes sum of data ("buffer") sizes
 * @param monitorUsedBytes sum of {@code monitorused[i]} (NVML as the library saw it)
 * @param smLimitPercent SM limit percent (0 means unlimited, i.e. 100)
 * @param regionSmUtilPercent sum of slots' {@code sm_util} (can exceed 100, as in HAMi)
 * @param hasExtension whether libvgpu's extension counters below are present
 * @param oomRejections extension: allocations refused at the limit
 * @param throttledNanos extension: time launches were delayed by the SM limiter
 * @param launchesDelayed extension: launches the limiter delayed
 * @param goneBytes sum of {@code used[i].total} over GONE slots (memory held by nobody)
 * @param uuidRejected why the regions' uuid for this index was not used as {@code uuid} ({@link
 *     DeviceIdentities}: not_on_node, invalid_syntax, churn); "" when it was
 */
public record DeviceUsageSummary(
    int index,
    String uuid,
    long usedBytes,
    long limitBytes,
    long contextBytes,
    long moduleBytes,
    long dataBytes,
    long monitorUsedBytes,
    int smLimitPercent,
    long regionSmUtilPercent,
    boolean hasExtension,
    long oomRejections,
    long throttledNanos,
    long launchesDelayed,
    long goneBytes,
    String uuidRejected) {

  /** SM limit as a 0-1 ratio; 0 in the region means no limit (1.0). */
  public double smLimitRatio() {
    int p = smLimitPercent <= 0 || smLimitPercent > 100 ? 100 : smLimitPercent;
    return p / 100.0;
  }
}
