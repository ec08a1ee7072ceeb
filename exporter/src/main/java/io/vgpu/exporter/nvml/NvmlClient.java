package io.vgpu.exporter.nvml;

import java.util.List;

/**
 * The NVML queries the exporter needs. Implementations map every {@code nvmlReturn_t} to a {@link
 * NvmlResult}; they throw only for programming errors.
 *
 * <p>Thread safety: implementations must allow calls from one thread at a time; {@link NvmlSampler}
 * is the only caller in the exporter.
 */
public interface NvmlClient extends AutoCloseable {

  /** {@code nvmlInit_v2}; may be called again after {@link #shutdown()}. */
  NvmlReturn init();

  /** {@code nvmlShutdown}; handles obtained before are invalid afterwards. */
  NvmlReturn shutdown();

  /** The driver version string, e.g. "580.159.04". */
  NvmlResult<String> driverVersion();

  /** Number of physical GPUs. */
  NvmlResult<Integer> deviceCount();

  /** Handle of the physical GPU at an NVML index. */
  NvmlResult<DeviceHandle> deviceHandle(int index);

  /** MIG devices under a physical GPU; empty when MIG is off or not supported. */
  NvmlResult<List<DeviceHandle>> migDevices(DeviceHandle parent);

  NvmlResult<GpuIdentity> identity(DeviceHandle device);

  NvmlResult<MemoryInfo> memory(DeviceHandle device);

  NvmlResult<Utilization> utilization(DeviceHandle device);

  /** Compute processes with a context on the device (newest API version the library has). */
  NvmlResult<List<RunningProcess>> runningProcesses(DeviceHandle device);

  /**
   * Per-process utilization samples newer than {@code lastSeenMicros}; an empty list when there are
   * none (NVML_ERROR_NOT_FOUND).
   */
  NvmlResult<List<ProcessSample>> processUtilization(DeviceHandle device, long lastSeenMicros);

  /**
   * Timestamps of the GPU's own utilization samples newer than {@code lastSeenMicros} ({@code
   * nvmlDeviceGetSamples} with {@code NVML_GPU_UTILIZATION_SAMPLES}): one per sampling tick,
   * whether or not a process ran, so they tell the GPU's sampling period. An empty list when there
   * are none (NVML_ERROR_NOT_FOUND); NOT_SUPPORTED where the driver or the device (MIG) has no such
   * samples.
   */
  default NvmlResult<List<Long>> utilizationSampleTimes(DeviceHandle device, long lastSeenMicros) {
    return NvmlResult.err("nvmlDeviceGetSamples", NvmlReturn.NOT_SUPPORTED);
  }

  /**
   * {@code nvmlDeviceGetTotalEnergyConsumption}: millijoules the GPU used since the driver loaded
   * (Volta and newer; NOT_SUPPORTED on older GPUs and on MIG devices). Never negative: a value
   * beyond 2^63 is an error.
   */
  default NvmlResult<Long> totalEnergyMillijoules(DeviceHandle device) {
    return NvmlResult.err("nvmlDeviceGetTotalEnergyConsumption", NvmlReturn.NOT_SUPPORTED);
  }

  /** {@code nvmlDeviceGetPowerUsage}: the board's power draw in milliwatts. */
  default NvmlResult<Long> powerMilliwatts(DeviceHandle device) {
    return NvmlResult.err("nvmlDeviceGetPowerUsage", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)}: the GPU die temperature, °C. */
  default NvmlResult<Long> temperatureCelsius(DeviceHandle device) {
    return NvmlResult.err("nvmlDeviceGetTemperature", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /**
   * {@code nvmlDeviceGetCurrentClocksEventReasons} (R535 on; {@code
   * nvmlDeviceGetCurrentClocksThrottleReasons} before): the mask of {@link ClockEventReason} bits.
   */
  default NvmlResult<Long> clockEventReasons(DeviceHandle device) {
    return NvmlResult.err("nvmlDeviceGetCurrentClocksEventReasons", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /**
   * {@code nvmlDeviceGetTotalEccErrors} for both error types of one counter: volatile (since the
   * driver loaded) or aggregate (lifetime). NOT_SUPPORTED where the GPU has no ECC or it is off.
   */
  default NvmlResult<EccCounts> eccErrors(DeviceHandle device, boolean aggregate) {
    return NvmlResult.err("nvmlDeviceGetTotalEccErrors", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlDeviceGetRemappedRows} (Ampere and newer). */
  default NvmlResult<RemappedRows> remappedRows(DeviceHandle device) {
    return NvmlResult.err("nvmlDeviceGetRemappedRows", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlEventSetCreate}; the caller must {@link #eventSetFree} it before shutdown. */
  default NvmlResult<EventSet> eventSetCreate() {
    return NvmlResult.err("nvmlEventSetCreate", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlDeviceRegisterEvents}: adds {@code eventTypes} of a device to the set. */
  default NvmlReturn registerEvents(DeviceHandle device, long eventTypes, EventSet set) {
    return NvmlReturn.FUNCTION_NOT_FOUND;
  }

  /**
   * {@code nvmlEventSetWait_v2}: the next event of the set, waiting at most {@code timeoutMs} (0:
   * do not wait); empty when none came (NVML_ERROR_TIMEOUT).
   */
  default NvmlResult<java.util.Optional<NvmlEvent>> eventSetWait(EventSet set, int timeoutMs) {
    return NvmlResult.err("nvmlEventSetWait_v2", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlEventSetFree}; the set is invalid afterwards. */
  default NvmlReturn eventSetFree(EventSet set) {
    return NvmlReturn.FUNCTION_NOT_FOUND;
  }

  /**
   * {@code nvmlDeviceGetGpuInstanceId} and {@code nvmlDeviceGetComputeInstanceId} of a MIG device
   * (NOT_SUPPORTED on a physical GPU).
   */
  default NvmlResult<MigIds> migInstanceIds(DeviceHandle mig) {
    return NvmlResult.err("nvmlDeviceGetGpuInstanceId", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlGpmQueryDeviceSupport}: whether the GPU has GPM counters (Hopper and newer). */
  default NvmlResult<Boolean> gpmSupported(DeviceHandle device) {
    return NvmlResult.err("nvmlGpmQueryDeviceSupport", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlGpmSampleAlloc}; the caller must {@link #gpmSampleFree} it before shutdown. */
  default NvmlResult<GpmSample> gpmSampleAlloc() {
    return NvmlResult.err("nvmlGpmSampleAlloc", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** {@code nvmlGpmSampleFree}; the sample is invalid afterwards. */
  default NvmlReturn gpmSampleFree(GpmSample sample) {
    return NvmlReturn.FUNCTION_NOT_FOUND;
  }

  /** {@code nvmlGpmMigSampleGet}: samples GPU instance {@code gpuInstanceId} of {@code parent}. */
  default NvmlReturn gpmMigSampleGet(DeviceHandle parent, int gpuInstanceId, GpmSample sample) {
    return NvmlReturn.FUNCTION_NOT_FOUND;
  }

  /**
   * {@code nvmlGpmMetricsGet} for {@code NVML_GPM_METRIC_SM_UTIL} between two samples of one
   * instance, the second taken later: the percent (0-100) of SMs busy in between.
   */
  default NvmlResult<Double> gpmSmUtilPercent(GpmSample first, GpmSample second) {
    return NvmlResult.err("nvmlGpmMetricsGet", NvmlReturn.FUNCTION_NOT_FOUND);
  }

  /** Releases the library (does not call {@link #shutdown()}). */
  @Override
  void close();
}
