package io.vgpu.exporter.nvml;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;

/**
 * XID errors through NVML events: one event set per NVML initialisation, each physical GPU
 * registered for {@code nvmlEventTypeXidCriticalError} when first polled, the set drained with a
 * zero timeout on the sampler thread at every poll (never on a scrape, never waiting). Counts are
 * kept per GPU uuid for the exporter's life, across re-initialisations.
 *
 * <p>Bounds: at most {@link #MAX_EVENTS_PER_POLL} events are read per poll (the rest wait in the
 * set for the next one, nothing is dropped); per GPU at most {@link #MAX_XID_LABELS} distinct XID
 * numbers get their own {@code xid} label, and later numbers, like numbers outside 0..{@link
 * #MAX_XID}, are counted under {@code xid="other"}.
 *
 * <p>Not thread safe (but {@link #unmatchedEvents()}): the sampler calls it under its own lock.
 */
final class XidEventWatcher {
  static final int MAX_XID_LABELS = 16;
  static final long MAX_XID = 1023;
  static final int MAX_EVENTS_PER_POLL = 256;
  static final String OTHER = "other";

  private final Consumer<NvmlReturn> countError;
  private Optional<EventSet> set = Optional.empty();
  private Optional<NvmlReturn> setFailure = Optional.empty();
  private final Set<String> registered = new HashSet<>();
  private final Map<String, NvmlReturn> unavailable = new HashMap<>();
  private final Map<Long, String> uuidByAddress = new HashMap<>();
  private final Map<String, Map<String, Long>> counts = new HashMap<>();
  private final java.util.concurrent.atomic.AtomicLong unmatched =
      new java.util.concurrent.atomic.AtomicLong();

  /**
   * @param countError the sampler's error accounting, for codes that are failures
   */
  XidEventWatcher(Consumer<NvmlReturn> countError) {
    this.countError = countError;
  }

  private static boolean absentFeature(NvmlReturn code) {
    return code.equals(NvmlReturn.NOT_SUPPORTED) || code.equals(NvmlReturn.FUNCTION_NOT_FOUND);
  }

  private void failed(NvmlReturn code) {
    if (!absentFeature(code)) {
      countError.accept(code);
    }
  }

  /**
   * Registers a physical GPU (once per event set). A failure, like a failed set creation, is
   * counted once and kept as the GPU's reason until NVML is initialised again ({@link #close}): a
   * driver that refuses events does not add an error every poll.
   */
  void register(NvmlClient client, DeviceHandle device, String uuid) {
    uuidByAddress.put(device.address(), uuid);
    if (set.isEmpty() && setFailure.isEmpty()) {
      switch (client.eventSetCreate()) {
        case NvmlResult.Ok<EventSet> ok -> set = Optional.of(ok.value());
        case NvmlResult.Err<EventSet> err -> {
          setFailure = Optional.of(err.code());
          failed(err.code());
        }
      }
    }
    if (set.isEmpty()) {
      unavailable.put(uuid, setFailure.orElse(NvmlReturn.UNKNOWN));
      return;
    }
    if (registered.contains(uuid) || unavailable.containsKey(uuid)) {
      return;
    }
    NvmlReturn r = client.registerEvents(device, NvmlEvent.XID_CRITICAL_ERROR, set.get());
    if (r.isSuccess()) {
      registered.add(uuid);
    } else {
      unavailable.put(uuid, r);
      failed(r);
    }
  }

  /** Reads the events that are ready, without waiting, at most {@link #MAX_EVENTS_PER_POLL}. */
  void drain(NvmlClient client) {
    if (set.isEmpty()) {
      return;
    }
    for (int i = 0; i < MAX_EVENTS_PER_POLL; i++) {
      switch (client.eventSetWait(set.get(), 0)) {
        case NvmlResult.Ok<Optional<NvmlEvent>> ok -> {
          if (ok.value().isEmpty()) {
            return;
          }
          record(ok.value().get());
        }
        case NvmlResult.Err<Optional<NvmlEvent>> err -> {
          countError.accept(err.code());
          return;
        }
      }
    }
  }

  private void record(NvmlEvent e) {
    if (e.eventType() != NvmlEvent.XID_CRITICAL_ERROR) {
      return; // only XIDs are registered
    }
    String uuid = uuidByAddress.get(e.deviceAddress());
    if (uuid == null) {
      unmatched.incrementAndGet();
      return;
    }
    Map<String, Long> byXid = counts.computeIfAbsent(uuid, u -> new LinkedHashMap<>());
    long xid = e.eventData();
    String label = xid >= 0 && xid <= MAX_XID ? Long.toString(xid) : OTHER;
    if (!byXid.containsKey(label) && !label.equals(OTHER) && numbered(byXid) >= MAX_XID_LABELS) {
      label = OTHER;
    }
    byXid.merge(label, 1L, Long::sum);
  }

  private static long numbered(Map<String, Long> byXid) {
    return byXid.keySet().stream().filter(k -> !k.equals(OTHER)).count();
  }

  /** XID counts of a GPU by label. */
  Map<String, Long> counts(String uuid) {
    return Map.copyOf(counts.getOrDefault(uuid, Map.of()));
  }

  /** Why a GPU's XID events are not watched; empty while they are. */
  Optional<NvmlReturn> unavailable(String uuid) {
    return Optional.ofNullable(unavailable.get(uuid));
  }

  /**
   * Events whose device handle was no GPU this watcher registered; safe from any thread (a scrape
   * reads it without the sampler's lock).
   */
  long unmatchedEvents() {
    return unmatched.get();
  }

  /** The snapshots with each physical GPU's XID counts and reason attached. */
  List<GpuSnapshot> attach(List<GpuSnapshot> gpus) {
    List<GpuSnapshot> out = new ArrayList<>(gpus.size());
    for (GpuSnapshot g : gpus) {
      String uuid = g.identity().uuid();
      out.add(
          g.identity().migIndex() >= 0
              ? g
              : g.withHealth(g.health().withXid(counts(uuid), unavailable(uuid))));
    }
    return out;
  }

  /**
   * Frees the event set (before {@code nvmlShutdown}: its handle dies with the library's state);
   * the counts stay. The next {@link #register} creates a new set.
   */
  void close(NvmlClient client) {
    set.ifPresent(
        s -> {
          NvmlReturn r = client.eventSetFree(s);
          if (!r.isSuccess()) {
            countError.accept(r);
          }
        });
    set = Optional.empty();
    setFailure = Optional.empty();
    registered.clear();
    unavailable.clear();
    uuidByAddress.clear();
  }
}
