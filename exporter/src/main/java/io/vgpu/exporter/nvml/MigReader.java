package io.vgpu.exporter.nvml;

import io.vgpu.exporter.nvml.SmActivity.Reason;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Reads what makes each MIG device one ({@link MigInstance}) during the sampler's poll, and keeps
 * the GPM samples that give each GPU instance's SM activity: one sample per instance per poll, the
 * activity between it and the previous poll's ({@code nvmlGpmMigSampleGet}, {@code
 * nvmlGpmMetricsGet}). Nothing here runs in a scrape.
 *
 * <p>Bounds: at most {@link #MAX_INSTANCES} instances keep a sample (beyond that: {@link
 * Reason#SAMPLE_LIMIT}); an instance not seen in a poll has its sample freed at the poll's end, and
 * {@link #close} frees every sample before NVML is shut down (a sample does not survive it).
 *
 * <p>Not thread safe: the sampler calls it under its own lock.
 */
final class MigReader {
  /** GPU instances whose previous GPM sample is kept (7 per GPU on 16 GPUs fit). */
  static final int MAX_INSTANCES = 128;

  private final Consumer<NvmlReturn> countFailure;

  /** The previous poll's sample of each instance, by parent UUID and GPU instance id. */
  private final Map<String, GpmSample> previous = new HashMap<>();

  /** Instances read in this poll, and their activity (instances shared by compute instances). */
  private final Map<String, SmActivity> thisPoll = new HashMap<>();

  private final Map<String, Optional<Reason>> gpmByParent = new HashMap<>();

  MigReader(Consumer<NvmlReturn> countFailure) {
    this.countFailure = countFailure;
  }

  /** Starts a poll: nothing read yet. */
  void beginPoll() {
    thisPoll.clear();
    gpmByParent.clear();
  }

  /** The MIG instance of {@code mig} (a device of {@code parent}) named {@code migName}. */
  MigInstance read(
      NvmlClient client, DeviceHandle parent, String parentUuid, DeviceHandle mig, String name) {
    NvmlResult<MigIds> ids = client.migInstanceIds(mig);
    count(ids);
    Optional<MigIds> known =
        ids instanceof NvmlResult.Ok<MigIds>(MigIds v) ? Optional.of(v) : Optional.empty();
    SmActivity activity =
        known
            .map(v -> activity(client, parent, parentUuid, v.gpuInstanceId()))
            .orElse(SmActivity.unknown(Reason.INSTANCE_UNKNOWN));
    return new MigInstance(parentUuid, known, MigInstance.profileOf(name), activity);
  }

  private SmActivity activity(NvmlClient client, DeviceHandle parent, String parentUuid, int gi) {
    Optional<Reason> gpm = gpmByParent.computeIfAbsent(parentUuid, u -> gpm(client, parent));
    if (gpm.isPresent()) {
      return SmActivity.unknown(gpm.get());
    }
    return thisPoll.computeIfAbsent(parentUuid + '/' + gi, key -> sample(client, parent, gi, key));
  }

  /** Why the parent has no GPM, or empty when it has. */
  private Optional<Reason> gpm(NvmlClient client, DeviceHandle parent) {
    NvmlResult<Boolean> supported = client.gpmSupported(parent);
    return switch (supported) {
      case NvmlResult.Ok<Boolean>(Boolean yes) ->
          yes ? Optional.empty() : Optional.of(Reason.GPM_UNSUPPORTED);
      case NvmlResult.Err<Boolean> err when err.code().equals(NvmlReturn.FUNCTION_NOT_FOUND) ->
          Optional.of(Reason.DRIVER_WITHOUT_GPM);
      case NvmlResult.Err<Boolean> err when err.code().equals(NvmlReturn.NOT_SUPPORTED) ->
          Optional.of(Reason.GPM_UNSUPPORTED);
      case NvmlResult.Err<Boolean> err -> {
        countFailure.accept(err.code());
        yield Optional.of(Reason.GPM_ERROR);
      }
    };
  }

  /** Takes this poll's sample of instance {@code key} and the activity since the previous one. */
  private SmActivity sample(NvmlClient client, DeviceHandle parent, int gi, String key) {
    if (!previous.containsKey(key) && previous.size() >= MAX_INSTANCES) {
      return SmActivity.unknown(Reason.SAMPLE_LIMIT);
    }
    NvmlResult<GpmSample> alloc = client.gpmSampleAlloc();
    if (!(alloc instanceof NvmlResult.Ok<GpmSample>(GpmSample fresh))) {
      count(alloc);
      return SmActivity.unknown(Reason.GPM_ERROR);
    }
    NvmlReturn got = client.gpmMigSampleGet(parent, gi, fresh);
    if (!got.isSuccess()) {
      countFailure.accept(got);
      free(client, fresh);
      return SmActivity.unknown(Reason.GPM_ERROR); // the previous sample stays for the next poll
    }
    GpmSample before = previous.put(key, fresh);
    if (before == null) {
      return SmActivity.unknown(Reason.FIRST_SAMPLE);
    }
    NvmlResult<Double> percent = client.gpmSmUtilPercent(before, fresh);
    free(client, before);
    count(percent);
    return percent instanceof NvmlResult.Ok<Double>(Double p)
        ? SmActivity.of(Math.clamp(p / 100.0, 0.0, 1.0))
        : SmActivity.unknown(Reason.GPM_ERROR);
  }

  /** Ends a poll: frees the samples of instances it did not read (destroyed, or their GPU gone). */
  void endPoll(NvmlClient client) {
    Set<String> seen = new HashSet<>(thisPoll.keySet());
    for (Iterator<Map.Entry<String, GpmSample>> it = previous.entrySet().iterator();
        it.hasNext(); ) {
      Map.Entry<String, GpmSample> e = it.next();
      if (!seen.contains(e.getKey())) {
        free(client, e.getValue());
        it.remove();
      }
    }
  }

  /** Frees every sample; call before {@code nvmlShutdown}. */
  void close(NvmlClient client) {
    previous.values().forEach(s -> free(client, s));
    previous.clear();
    thisPoll.clear();
  }

  /** Samples kept between polls (for tests: a leak shows). */
  int samplesKept() {
    return previous.size();
  }

  private void free(NvmlClient client, GpmSample s) {
    NvmlReturn r = client.gpmSampleFree(s);
    if (!r.isSuccess()) {
      countFailure.accept(r);
    }
  }

  private void count(NvmlResult<?> r) {
    if (r instanceof NvmlResult.Err<?> err
        && !err.code().equals(NvmlReturn.NOT_SUPPORTED)
        && !err.code().equals(NvmlReturn.FUNCTION_NOT_FOUND)) {
      countFailure.accept(err.code());
    }
  }
}
