package io.vgpu.exporter.nvml;

import static io.vgpu.exporter.nvml.JnaNvmlClient.pointer;

import com.sun.jna.Memory;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.util.List;
import java.util.Optional;

/**
 * The health and event queries of {@link JnaNvmlClient}, through its symbol table: power,
 * temperature, clock event reasons, ECC counts, remapped rows and XID event sets. Signatures and
 * constants are NVML's ({@code nvml.h}); every out value is read only after NVML_SUCCESS.
 */
final class JnaNvmlHealth {
  private static final int TEMPERATURE_GPU = 0; // nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
  private static final int CORRECTED = 0; // nvmlMemoryErrorType_t
  private static final int UNCORRECTED = 1;
  private static final int VOLATILE_ECC = 0; // nvmlEccCounterType_t
  private static final int AGGREGATE_ECC = 1;
  private static final int EVENT_DATA_SIZE =
      32; // nvmlEventData_t {device; ull type; ull data; 2 uint}

  /** Beyond this a temperature reading is garbage (NVML reports whole degrees of a die). */
  private static final long MAX_PLAUSIBLE_CELSIUS = 1000;

  private final JnaNvmlClient nvml;

  JnaNvmlHealth(JnaNvmlClient nvml) {
    this.nvml = nvml;
  }

  NvmlResult<Long> powerMilliwatts(DeviceHandle device) {
    IntByReference mw = new IntByReference();
    JnaNvmlClient.Call c = nvml.call("nvmlDeviceGetPowerUsage", pointer(device), mw);
    return c.ok() ? NvmlResult.ok(Integer.toUnsignedLong(mw.getValue())) : c.err();
  }

  NvmlResult<Long> temperatureCelsius(DeviceHandle device) {
    IntByReference t = new IntByReference();
    JnaNvmlClient.Call c =
        nvml.call("nvmlDeviceGetTemperature", pointer(device), TEMPERATURE_GPU, t);
    if (!c.ok()) {
      return c.err();
    }
    long celsius = Integer.toUnsignedLong(t.getValue());
    return celsius > MAX_PLAUSIBLE_CELSIUS
        ? NvmlResult.err(c.function(), NvmlReturn.UNKNOWN)
        : NvmlResult.ok(celsius);
  }

  NvmlResult<Long> clockEventReasons(DeviceHandle device) {
    Memory mask = new Memory(8);
    mask.clear();
    JnaNvmlClient.Call c =
        nvml.call(
            List.of(
                "nvmlDeviceGetCurrentClocksEventReasons",
                "nvmlDeviceGetCurrentClocksThrottleReasons"),
            pointer(device),
            mask);
    return c.ok() ? NvmlResult.ok(mask.getLong(0)) : c.err();
  }

  NvmlResult<EccCounts> eccErrors(DeviceHandle device, boolean aggregate) {
    int counter = aggregate ? AGGREGATE_ECC : VOLATILE_ECC;
    NvmlResult<Long> corrected = ecc(device, CORRECTED, counter);
    if (!(corrected instanceof NvmlResult.Ok<Long>(Long c))) {
      return ((NvmlResult.Err<Long>) corrected).cast();
    }
    NvmlResult<Long> uncorrected = ecc(device, UNCORRECTED, counter);
    if (!(uncorrected instanceof NvmlResult.Ok<Long>(Long u))) {
      return ((NvmlResult.Err<Long>) uncorrected).cast();
    }
    return NvmlResult.ok(new EccCounts(c, u));
  }

  private NvmlResult<Long> ecc(DeviceHandle device, int errorType, int counterType) {
    Memory count = new Memory(8);
    count.clear();
    JnaNvmlClient.Call c =
        nvml.call("nvmlDeviceGetTotalEccErrors", pointer(device), errorType, counterType, count);
    if (!c.ok()) {
      return c.err();
    }
    long n = count.getLong(0);
    return n < 0 ? NvmlResult.err(c.function(), NvmlReturn.UNKNOWN) : NvmlResult.ok(n);
  }

  NvmlResult<RemappedRows> remappedRows(DeviceHandle device) {
    IntByReference corr = new IntByReference();
    IntByReference unc = new IntByReference();
    IntByReference pending = new IntByReference();
    IntByReference failure = new IntByReference();
    JnaNvmlClient.Call c =
        nvml.call("nvmlDeviceGetRemappedRows", pointer(device), corr, unc, pending, failure);
    if (!c.ok()) {
      return c.err();
    }
    return NvmlResult.ok(
        new RemappedRows(
            Integer.toUnsignedLong(corr.getValue()),
            Integer.toUnsignedLong(unc.getValue()),
            pending.getValue() != 0,
            failure.getValue() != 0));
  }

  NvmlResult<EventSet> eventSetCreate() {
    PointerByReference out = new PointerByReference();
    JnaNvmlClient.Call c = nvml.call("nvmlEventSetCreate", out);
    if (!c.ok()) {
      return c.err();
    }
    long address = Pointer.nativeValue(out.getValue());
    return address == 0
        ? NvmlResult.err(c.function(), NvmlReturn.UNKNOWN)
        : NvmlResult.ok(new EventSet(address));
  }

  NvmlReturn registerEvents(DeviceHandle device, long eventTypes, EventSet set) {
    return nvml.call(
            "nvmlDeviceRegisterEvents", pointer(device), eventTypes, new Pointer(set.address()))
        .code();
  }

  NvmlResult<Optional<NvmlEvent>> eventSetWait(EventSet set, int timeoutMs) {
    Memory data = new Memory(EVENT_DATA_SIZE);
    data.clear();
    JnaNvmlClient.Call c =
        nvml.call(
            List.of("nvmlEventSetWait_v2", "nvmlEventSetWait"),
            new Pointer(set.address()),
            data,
            timeoutMs);
    if (c.code().equals(NvmlReturn.TIMEOUT)) {
      return NvmlResult.ok(Optional.empty());
    }
    if (!c.ok()) {
      return c.err();
    }
    return NvmlResult.ok(
        Optional.of(
            new NvmlEvent(
                Pointer.nativeValue(data.getPointer(0)), data.getLong(8), data.getLong(16))));
  }

  NvmlReturn eventSetFree(EventSet set) {
    return nvml.call("nvmlEventSetFree", new Pointer(set.address())).code();
  }
}
