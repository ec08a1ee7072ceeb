package io.vgpu.exporter.metrics;

import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusScrapeRequest;
import io.prometheus.metrics.model.snapshots.MetricFamilyDescriptor;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.exposition.UnsupportedFamilyException;
import java.util.List;
import java.util.function.Predicate;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Wraps a collector: times it, turns a failure into an empty result plus {@code
 * vgpu_exporter_collector_success{collector} 0} (one broken collector never fails the scrape).
 */
final class InstrumentedCollector implements MultiCollector {
  private static final Logger LOG = LoggerFactory.getLogger(InstrumentedCollector.class);

  private final String name;
  private final MultiCollector delegate;
  private final CollectorStats stats;

  InstrumentedCollector(String name, MultiCollector delegate, CollectorStats stats) {
    this.name = name;
    this.delegate = delegate;
    this.stats = stats;
  }

  MultiCollector delegate() {
    return delegate;
  }

  @Override
  public MetricSnapshots collect() {
    return collect(n -> true, null);
  }

  @Override
  public MetricSnapshots collect(PrometheusScrapeRequest request) {
    return collect(n -> true, request);
  }

  @Override
  public MetricSnapshots collect(Predicate<String> includedNames) {
    return collect(includedNames, null);
  }

  @Override
  public MetricSnapshots collect(Predicate<String> includedNames, PrometheusScrapeRequest request) {
    long start = System.nanoTime();
    try {
      MetricSnapshots s = delegate.collect(includedNames, request);
      stats.record(name, true, System.nanoTime() - start);
      return s;
    } catch (CollectorUnavailableException e) {
      LOG.atDebug()
          .setMessage("collector unavailable")
          .addKeyValue("collector", name)
          .addKeyValue("reason", e.getMessage())
          .log();
      stats.record(name, false, System.nanoTime() - start);
      return new MetricSnapshots();
    } catch (RuntimeException e) {
      LOG.atError().setMessage("collector failed").addKeyValue("collector", name).setCause(e).log();
      stats.record(name, false, System.nanoTime() - start);
      return new MetricSnapshots();
    }
  }

  /**
   * The render path's families (see {@link VgpuCollector#families}), with the same accounting: a
   * failure is logged, counted and leaves this collector's families out.
   *
   * @throws UnsupportedFamilyException when a collector that is not a {@link VgpuCollector} returns
   *     a snapshot only client_java writes
   */
  List<Family> families(PrometheusScrapeRequest request) throws UnsupportedFamilyException {
    long start = System.nanoTime();
    try {
      List<Family> out;
      if (delegate instanceof VgpuCollector v) {
        out = v.families(n -> true, request);
      } else {
        out = new java.util.ArrayList<>();
        for (var s : delegate.collect(n -> true, request)) {
          out.add(Family.of(s));
        }
      }
      stats.record(name, true, System.nanoTime() - start);
      return out;
    } catch (CollectorUnavailableException e) {
      LOG.atDebug()
          .setMessage("collector unavailable")
          .addKeyValue("collector", name)
          .addKeyValue("reason", e.getMessage())
          .log();
      stats.record(name, false, System.nanoTime() - start);
      return List.of();
    } catch (RuntimeException e) {
      LOG.atError().setMessage("collector failed").addKeyValue("collector", name).setCause(e).log();
      stats.record(name, false, System.nanoTime() - start);
      return List.of();
    }
  }

  @Override
  public List<MetricFamilyDescriptor> getMetricFamilyDescriptors() {
    return delegate.getMetricFamilyDescriptors();
  }
}
