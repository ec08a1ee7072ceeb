package io.vgpu.exporter.nvml;

import com.sun.jna.Function;
import com.sun.jna.Memory;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * {@link NvmlClient} over JNA. Symbols are looked up lazily and each is optional, so one binary
 * works with every driver from R470 on: the running-process query falls back from {@code _v3} to
 * {@code _v2} to the unversioned call, memory from {@code _v2} to v1.
 *
 * <p>The {@code _v3} running-process call wrote 32-byte entries on R535.54 and 24-byte entries
 * before and after (and 16-byte ones on some builds), with no version field to tell. The client
 * sizes the buffer for the largest stride and picks the first stride under which every entry is
 * plausible, falling back to {@code _v2} when none is.
 *
 * <p>Thread safety: safe to call from several threads (NVML itself is thread safe), though the
 * exporter calls it from the sampler thread only. {@link #close()} does not unload the library: JNA
 * shares one {@link NativeLibrary} per name across the JVM.
 */
public final class JnaNvmlClient implements NvmlClient {
  /** The soname the driver installs; found through the dynamic linker's cache. */
  public static final String DEFAULT_LIBRARY = "libnvidia-ml.so.1";

  private static final int STRING_BUFFER = 96;
  private static final int SAMPLE_SIZE = 32;
  private static final int DEVICE_SAMPLE_SIZE = 16; // nvmlSample_t {ull timeStamp; nvmlValue_t}
  private static final int GPU_UTILIZATION_SAMPLES = 1; // nvmlSamplingType_t
  private static final int MAX_PLAUSIBLE_PID = 1 << 22; // PID_MAX_LIMIT on 64-bit Linux
  private static final long VALUE_NOT_AVAILABLE = -1L; // unsigned long long max
  private static final int[] V3_STRIDES = {24, 32, 16};

  private final NativeLibrary library;
  private final Set<String> hiddenSymbols;
  private final Map<String, Optional<Function>> functions = new ConcurrentHashMap<>();
  private volatile int v3Stride; // 0 = not learned yet
  private final JnaNvmlHealth health = new JnaNvmlHealth(this);
  private final JnaNvmlMig mig = new JnaNvmlMig((name, args) -> call(name, args).code());

  private JnaNvmlClient(NativeLibrary library, Set<String> hiddenSymbols) {
    this.library = library;
    this.hiddenSymbols = Set.copyOf(hiddenSymbols);
  }

  /**
   * Loads NVML from an absolute path or a library name ({@link #DEFAULT_LIBRARY}).
   *
   * @return the client, or {@link NvmlReturn#LIBRARY_NOT_FOUND} when the library cannot be loaded
   */
  public static NvmlResult<NvmlClient> load(String pathOrName) {
    return load(pathOrName, Set.of());
  }

  /**
   * As {@link #load(String)}, pretending the library lacks {@code hiddenSymbols}: lets CPU tests
   * drive the fallbacks for older drivers through the same library.
   */
  static NvmlResult<NvmlClient> load(String pathOrName, Set<String> hiddenSymbols) {
    Objects.requireNonNull(pathOrName, "pathOrName");
    try {
      return NvmlResult.ok(new JnaNvmlClient(NativeLibrary.getInstance(pathOrName), hiddenSymbols));
    } catch (UnsatisfiedLinkError e) {
      return NvmlResult.err("dlopen", NvmlReturn.LIBRARY_NOT_FOUND);
    }
  }

  Optional<Function> function(String name) {
    return functions.computeIfAbsent(
        name,
        n -> {
          if (hiddenSymbols.contains(n)) {
            return Optional.empty();
          }
          try {
            return Optional.of(library.getFunction(n));
          } catch (UnsatisfiedLinkError e) {
            return Optional.empty();
          }
        });
  }

  /** Calls the first of {@code names} the library has; FUNCTION_NOT_FOUND when it has none. */
  Call call(List<String> names, Object... args) {
    for (String name : names) {
      Optional<Function> f = function(name);
      if (f.isPresent()) {
        return new Call(name, new NvmlReturn(f.get().invokeInt(args)));
      }
    }
    return new Call(names.getFirst(), NvmlReturn.FUNCTION_NOT_FOUND);
  }

  Call call(String name, Object... args) {
    return call(List.of(name), args);
  }

  record Call(String function, NvmlReturn code) {
    boolean ok() {
      return code.isSuccess();
    }

    <T> NvmlResult<T> err() {
      return NvmlResult.err(function, code);
    }
  }

  static Pointer pointer(DeviceHandle device) {
    return new Pointer(device.address());
  }

  @Override
  public NvmlReturn init() {
    return call(List.of("nvmlInit_v2", "nvmlInit")).code();
  }

  @Override
  public NvmlReturn shutdown() {
    return call("nvmlShutdown").code();
  }

  @Override
  public NvmlResult<String> driverVersion() {
    return string(List.of("nvmlSystemGetDriverVersion"), null);
  }

  @Override
  public NvmlResult<Integer> deviceCount() {
    IntByReference count = new IntByReference();
    Call c = call(List.of("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"), count);
    if (!c.ok()) {
      return c.err();
    }
    int n = count.getValue();
    return n < 0 || n > 64 ? NvmlResult.err(c.function(), NvmlReturn.UNKNOWN) : NvmlResult.ok(n);
  }

  @Override
  public NvmlResult<DeviceHandle> deviceHandle(int index) {
    PointerByReference out = new PointerByReference();
    Call c =
        call(List.of("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"), index, out);
    if (!c.ok()) {
      return c.err();
    }
    return NvmlResult.ok(new DeviceHandle(Pointer.nativeValue(out.getValue()), index, -1));
  }

  @Override
  public NvmlResult<List<DeviceHandle>> migDevices(DeviceHandle parent) {
    IntByReference current = new IntByReference();
    IntByReference pending = new IntByReference();
    Call mode = call("nvmlDeviceGetMigMode", pointer(parent), current, pending);
    if (mode.code().equals(NvmlReturn.NOT_SUPPORTED)
        || mode.code().equals(NvmlReturn.FUNCTION_NOT_FOUND)
        || (mode.ok() && current.getValue() == 0)) {
      return NvmlResult.ok(List.of());
    }
    if (!mode.ok()) {
      return mode.err();
    }
    IntByReference max = new IntByReference();
    Call count = call("nvmlDeviceGetMaxMigDeviceCount", pointer(parent), max);
    if (!count.ok()) {
      return count.err();
    }
    List<DeviceHandle> handles = new ArrayList<>();
    for (int j = 0; j < Math.min(max.getValue(), 64); j++) {
      PointerByReference out = new PointerByReference();
      Call c = call("nvmlDeviceGetMigDeviceHandleByIndex", pointer(parent), j, out);
      if (c.code().equals(NvmlReturn.NOT_FOUND) || c.code().equals(NvmlReturn.INVALID_ARGUMENT)) {
        continue; // no MIG device in that slot
      }
      if (!c.ok()) {
        return c.err();
      }
      handles.add(new DeviceHandle(Pointer.nativeValue(out.getValue()), parent.index(), j));
    }
    return NvmlResult.ok(List.copyOf(handles));
  }

  @Override
  public NvmlResult<GpuIdentity> identity(DeviceHandle device) {
    NvmlResult<String> uuid = string(List.of("nvmlDeviceGetUUID"), pointer(device));
    if (!(uuid instanceof NvmlResult.Ok<String> u)) {
      return ((NvmlResult.Err<String>) uuid).cast();
    }
    NvmlResult<String> name = string(List.of("nvmlDeviceGetName"), pointer(device));
    return NvmlResult.ok(
        new GpuIdentity(device.index(), device.migIndex(), u.value(), name.orElse("")));
  }

  /** A string query with NVML's (handle?, char*, unsigned int length) shape. */
  private NvmlResult<String> string(List<String> names, Pointer device) {
    for (int size = STRING_BUFFER; ; size *= 4) {
      Memory buffer = new Memory(size);
      buffer.clear();
      Call c = device == null ? call(names, buffer, size) : call(names, device, buffer, size);
      if (c.code().equals(NvmlReturn.INSUFFICIENT_SIZE) && size < 4096) {
        continue;
      }
      if (!c.ok()) {
        return c.err();
      }
      byte[] bytes = buffer.getByteArray(0, size);
      int len = 0;
      while (len < size && bytes[len] != 0) {
        len++;
      }
      return NvmlResult.ok(new String(bytes, 0, len, StandardCharsets.UTF_8));
    }
  }

  @Override
  public NvmlResult<MemoryInfo> memory(DeviceHandle device) {
    // nvmlMemory_v2_t: {uint version; ull total, reserved, free, used}; version = size | 2 << 24.
    Memory v2 = new Memory(40);
    v2.clear();
    v2.setInt(0, 40 | (2 << 24));
    Call c2 = call("nvmlDeviceGetMemoryInfo_v2", pointer(device), v2);
    if (c2.ok()) {
      return memoryInfo(v2.getLong(8), v2.getLong(32), c2);
    }
    if (!c2.code().equals(NvmlReturn.FUNCTION_NOT_FOUND)
        && !c2.code().equals(NvmlReturn.ARGUMENT_VERSION_MISMATCH)
        && !c2.code().equals(NvmlReturn.NOT_SUPPORTED)) {
      return c2.err();
    }
    Memory v1 = new Memory(24); // {ull total, free, used}
    v1.clear();
    Call c1 = call("nvmlDeviceGetMemoryInfo", pointer(device), v1);
    return c1.ok() ? memoryInfo(v1.getLong(0), v1.getLong(16), c1) : c1.err();
  }

  private static NvmlResult<MemoryInfo> memoryInfo(long total, long used, Call c) {
    if (total < 0 || used < 0) {
      return NvmlResult.err(c.function(), NvmlReturn.UNKNOWN); // beyond 2^63: garbage
    }
    return NvmlResult.ok(new MemoryInfo(total, used));
  }

  @Override
  public NvmlResult<Utilization> utilization(DeviceHandle device) {
    Memory u = new Memory(8);
    u.clear();
    Call c = call("nvmlDeviceGetUtilizationRates", pointer(device), u);
    if (!c.ok()) {
      return c.err();
    }
    return NvmlResult.ok(new Utilization(percent(u.getInt(0)), percent(u.getInt(4))));
  }

  private static int percent(int raw) {
    return Math.clamp(Integer.toUnsignedLong(raw), 0, 100);
  }

  @Override
  public NvmlResult<List<RunningProcess>> runningProcesses(DeviceHandle device) {
    if (function("nvmlDeviceGetComputeRunningProcesses_v3").isPresent()) {
      Raw raw = runningRaw("nvmlDeviceGetComputeRunningProcesses_v3", device, 32);
      if (!raw.call().ok()) {
        return raw.call().err();
      }
      int learned = v3Stride;
      for (int stride : learned != 0 ? new int[] {learned} : V3_STRIDES) {
        Optional<List<RunningProcess>> parsed = parse(raw, stride);
        if (parsed.isPresent()) {
          v3Stride = raw.count() > 1 ? stride : learned; // one entry cannot tell strides apart
          return NvmlResult.ok(parsed.get());
        }
      }
      v3Stride = 0;
    }
    if (function("nvmlDeviceGetComputeRunningProcesses_v2").isPresent()) {
      Raw raw = runningRaw("nvmlDeviceGetComputeRunningProcesses_v2", device, 24);
      if (!raw.call().ok()) {
        return raw.call().err();
      }
      return parse(raw, 24)
          .<NvmlResult<List<RunningProcess>>>map(NvmlResult::ok)
          .orElseGet(() -> NvmlResult.err(raw.call().function(), NvmlReturn.UNKNOWN));
    }
    Raw raw = runningRaw("nvmlDeviceGetComputeRunningProcesses", device, 16);
    if (!raw.call().ok()) {
      return raw.call().err();
    }
    return parse(raw, 16)
        .<NvmlResult<List<RunningProcess>>>map(NvmlResult::ok)
        .orElseGet(() -> NvmlResult.err(raw.call().function(), NvmlReturn.UNKNOWN));
  }

  private record Raw(Call call, Memory buffer, int count) {}

  /** NVML's two-call sizing protocol, retried when processes appear between the calls. */
  private Raw runningRaw(String name, DeviceHandle device, int maxStride) {
    IntByReference count = new IntByReference(0);
    Call sizing = call(name, pointer(device), count, Pointer.NULL);
    if (sizing.ok() && count.getValue() == 0) {
      return new Raw(sizing, new Memory(1), 0);
    }
    if (!sizing.ok() && !sizing.code().equals(NvmlReturn.INSUFFICIENT_SIZE)) {
      return new Raw(sizing, new Memory(1), 0);
    }
    int capacity = Math.max(count.getValue(), 1) + 8;
    for (int attempt = 0; ; attempt++) {
      Memory buffer = new Memory((long) capacity * maxStride);
      buffer.clear();
      count.setValue(capacity);
      Call c = call(name, pointer(device), count, buffer);
      if (c.code().equals(NvmlReturn.INSUFFICIENT_SIZE) && attempt < 3) {
        capacity = Math.max(capacity * 2, count.getValue() + 8);
        continue;
      }
      int n = Math.clamp(count.getValue(), 0, capacity);
      return new Raw(c, buffer, n);
    }
  }

  /** Entries under one stride, or empty when any of them is implausible under it. */
  private static Optional<List<RunningProcess>> parse(Raw raw, int stride) {
    List<RunningProcess> out = new ArrayList<>(raw.count());
    for (int i = 0; i < raw.count(); i++) {
      long base = (long) i * stride;
      int pid = raw.buffer().getInt(base);
      long used = raw.buffer().getLong(base + 8);
      if (pid <= 0 || pid > MAX_PLAUSIBLE_PID || (used < 0 && used != VALUE_NOT_AVAILABLE)) {
        return Optional.empty();
      }
      if (stride >= 24) {
        long gi = Integer.toUnsignedLong(raw.buffer().getInt(base + 16));
        long ci = Integer.toUnsignedLong(raw.buffer().getInt(base + 20));
        if ((gi > 1024 && gi != 0xFFFFFFFFL) || (ci > 1024 && ci != 0xFFFFFFFFL)) {
          return Optional.empty();
        }
      }
      out.add(
          new RunningProcess(
              pid, used == VALUE_NOT_AVAILABLE ? OptionalLong.empty() : OptionalLong.of(used)));
    }
    return Optional.of(List.copyOf(out));
  }

  @Override
  public NvmlResult<Long> totalEnergyMillijoules(DeviceHandle device) {
    Memory energy = new Memory(8); // unsigned long long
    energy.clear();
    Call c = call("nvmlDeviceGetTotalEnergyConsumption", pointer(device), energy);
    if (!c.ok()) {
      return c.err();
    }
    long mj = energy.getLong(0);
    return mj < 0 ? NvmlResult.err(c.function(), NvmlReturn.UNKNOWN) : NvmlResult.ok(mj);
  }

  @Override
  public NvmlResult<List<ProcessSample>> processUtilization(DeviceHandle device, long lastSeen) {
    IntByReference count = new IntByReference(0);
    NvmlResult<Filled> r =
        filled(
            count,
            SAMPLE_SIZE,
            buffer ->
                call("nvmlDeviceGetProcessUtilization", pointer(device), buffer, count, lastSeen));
    if (!(r instanceof NvmlResult.Ok<Filled>(Filled f))) {
      return ((NvmlResult.Err<Filled>) r).cast();
    }
    List<ProcessSample> samples = new ArrayList<>(f.count());
    for (int i = 0; i < f.count(); i++) {
      long base = (long) i * SAMPLE_SIZE;
      int pid = f.buffer().getInt(base);
      long ts = f.buffer().getLong(base + 8);
      if (pid <= 0 || ts <= 0) {
        continue; // empty or garbage entry: NVML pads with zeros
      }
      samples.add(
          new ProcessSample(
              pid,
              ts,
              percent(f.buffer().getInt(base + 16)),
              percent(f.buffer().getInt(base + 20))));
    }
    return NvmlResult.ok(List.copyOf(samples));
  }

  @Override
  public NvmlResult<List<Long>> utilizationSampleTimes(DeviceHandle device, long lastSeen) {
    IntByReference valueType = new IntByReference(0);
    IntByReference count = new IntByReference(0);
    NvmlResult<Filled> r =
        filled(
            count,
            DEVICE_SAMPLE_SIZE,
            buffer ->
                call(
                    "nvmlDeviceGetSamples",
                    pointer(device),
                    GPU_UTILIZATION_SAMPLES,
                    lastSeen,
                    valueType,
                    count,
                    buffer));
    if (!(r instanceof NvmlResult.Ok<Filled>(Filled f))) {
      return ((NvmlResult.Err<Filled>) r).cast();
    }
    List<Long> times = new ArrayList<>(f.count());
    for (int i = 0; i < f.count(); i++) {
      long ts = f.buffer().getLong((long) i * DEVICE_SAMPLE_SIZE);
      if (ts > 0) { // an empty entry (zero) or one beyond 2^63 is no tick
        times.add(ts);
      }
    }
    return NvmlResult.ok(List.copyOf(times));
  }

  /** The entries an NVML sample query filled: {@code count} of them in {@code buffer}. */
  private record Filled(Memory buffer, int count) {
    static final Filled NONE = new Filled(null, 0);
  }

  /**
   * NVML's sample queries: asked with a null buffer they say how many entries there are; then a
   * buffer of that many (plus slack, grown and asked again while NVML says it is too small, at most
   * 3 times) is filled. {@code fill} makes the call with the buffer given (null for sizing) and the
   * capacity this method puts in {@code count}. NOT_FOUND or no entries: none.
   */
  private static NvmlResult<Filled> filled(
      IntByReference count, int entrySize, java.util.function.Function<Pointer, Call> fill) {
    Call sizing = fill.apply(Pointer.NULL);
    if (sizing.code().equals(NvmlReturn.NOT_FOUND) || (sizing.ok() && count.getValue() == 0)) {
      return NvmlResult.ok(Filled.NONE);
    }
    if (!sizing.ok() && !sizing.code().equals(NvmlReturn.INSUFFICIENT_SIZE)) {
      return sizing.err();
    }
    int capacity = Math.max(count.getValue(), 1) + 16;
    for (int attempt = 0; ; attempt++) {
      Memory buffer = new Memory((long) capacity * entrySize);
      buffer.clear();
      count.setValue(capacity);
      Call c = fill.apply(buffer);
      if (c.code().equals(NvmlReturn.INSUFFICIENT_SIZE) && attempt < 3) {
        capacity = Math.max(capacity * 2, count.getValue() + 16);
        continue;
      }
      if (c.code().equals(NvmlReturn.NOT_FOUND)) {
        return NvmlResult.ok(Filled.NONE);
      }
      if (!c.ok()) {
        return c.err();
      }
      return NvmlResult.ok(new Filled(buffer, Math.clamp(count.getValue(), 0, capacity)));
    }
  }

  @Override
  public NvmlResult<Long> powerMilliwatts(DeviceHandle device) {
    return health.powerMilliwatts(device);
  }

  @Override
  public NvmlResult<Long> temperatureCelsius(DeviceHandle device) {
    return health.temperatureCelsius(device);
  }

  @Override
  public NvmlResult<Long> clockEventReasons(DeviceHandle device) {
    return health.clockEventReasons(device);
  }

  @Override
  public NvmlResult<EccCounts> eccErrors(DeviceHandle device, boolean aggregate) {
    return health.eccErrors(device, aggregate);
  }

  @Override
  public NvmlResult<RemappedRows> remappedRows(DeviceHandle device) {
    return health.remappedRows(device);
  }

  @Override
  public NvmlResult<EventSet> eventSetCreate() {
    return health.eventSetCreate();
  }

  @Override
  public NvmlReturn registerEvents(DeviceHandle device, long eventTypes, EventSet set) {
    return health.registerEvents(device, eventTypes, set);
  }

  @Override
  public NvmlResult<Optional<NvmlEvent>> eventSetWait(EventSet set, int timeoutMs) {
    return health.eventSetWait(set, timeoutMs);
  }

  @Override
  public NvmlReturn eventSetFree(EventSet set) {
    return health.eventSetFree(set);
  }

  @Override
  public NvmlResult<MigIds> migInstanceIds(DeviceHandle device) {
    return mig.migInstanceIds(device);
  }

  @Override
  public NvmlResult<Boolean> gpmSupported(DeviceHandle device) {
    return mig.gpmSupported(device);
  }

  @Override
  public NvmlResult<GpmSample> gpmSampleAlloc() {
    return mig.gpmSampleAlloc();
  }

  @Override
  public NvmlReturn gpmSampleFree(GpmSample sample) {
    return mig.gpmSampleFree(sample);
  }

  @Override
  public NvmlReturn gpmMigSampleGet(DeviceHandle parent, int gpuInstanceId, GpmSample sample) {
    return mig.gpmMigSampleGet(parent, gpuInstanceId, sample);
  }

  @Override
  public NvmlResult<Double> gpmSmUtilPercent(GpmSample first, GpmSample second) {
    return mig.gpmSmUtilPercent(first, second);
  }

  @Override
  public void close() {
    functions.clear();
  }
}
