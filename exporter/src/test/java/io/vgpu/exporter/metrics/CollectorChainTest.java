package io.vgpu.exporter.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import io.prometheus.metrics.model.snapshots.Labels;
import io.vgpu.exporter.exposition.Family;
import io.vgpu.exporter.node.NodeState;
import io.vgpu.exporter.testing.TestNode;
import java.io.IOException;
import java.lang.ref.WeakReference;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AutoClose;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The chain builds one node state per scrape, hands that one state to every collector, keeps none
 * of it once the scrape returns, and writes each collector's outcome once.
 */
class CollectorChainTest {
  @TempDir Path root;
  @AutoClose private TestNode node;
  private final AtomicInteger builds = new AtomicInteger();
  private final CollectorStats stats = new CollectorStats();

  @BeforeEach
  void setUp() throws IOException {
    node = new TestNode(root);
  }

  /** A chain of {@code members}, each named after its family, over counted node states. */
  private CollectorChain chainOf(Recording... members) {
    List<CollectorChain.Member> list = new ArrayList<>();
    for (Recording r : members) {
      list.add(new CollectorChain.Member(r.spec.name().substring("test_".length()), r));
    }
    return new CollectorChain(list, this::countedBuild, stats);
  }

  /** A fresh node state, counted (each one reads every mapped region). */
  private NodeState countedBuild() {
    builds.incrementAndGet();
    return node.states.build();
  }

  /** Records the node state of every call; optionally waits at a barrier, or throws. */
  private static final class Recording extends VgpuCollector {
    final FamilySpec.Gauge spec;
    final List<NodeState> seen = new CopyOnWriteArrayList<>();
    final CyclicBarrier barrier;
    final boolean fail;

    Recording(String family, CyclicBarrier barrier, boolean fail) {
      this(FamilySpec.gauge(family, "test family", "node"), barrier, fail);
    }

    private Recording(FamilySpec.Gauge spec, CyclicBarrier barrier, boolean fail) {
      super(List.of(spec));
      this.spec = spec;
      this.barrier = barrier;
      this.fail = fail;
    }

    @Override
    protected void collect(NodeState state, Sink out) {
      seen.add(state);
      if (barrier != null) {
        try {
          barrier.await(30, TimeUnit.SECONDS);
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
      }
      if (fail) {
        throw new IllegalStateException("broken");
      }
      out.add(families.gauge(spec).add(1, Labels.of("node", state.node())).build());
    }
  }

  @Test
  void oneScrape_buildsOneNodeState_andEveryCollectorGetsIt() {
    Recording a = new Recording("test_a", null, false);
    Recording b = new Recording("test_b", null, false);
    CollectorChain chain = chainOf(a, b);

    List<Family> page = chain.families();

    assertThat(builds).hasValue(1);
    assertThat(a.seen).hasSize(1);
    assertThat(b.seen).hasSize(1);
    assertThat(b.seen.getFirst()).isSameAs(a.seen.getFirst());
    assertThat(page)
        .extracting(f -> f.metadata().getPrometheusName())
        .containsExactly("test_a", "test_b");
    assertThat(stats.outcomes()).containsOnlyKeys("a", "b");
    assertThat(stats.outcomes().get("a").success()).isTrue();

    chain.collect(); // the client_java path: its own scrape, its own state
    assertThat(builds).hasValue(2);
    assertThat(a.seen.get(1)).isNotSameAs(a.seen.getFirst()).isSameAs(b.seen.get(1));
  }

  @Test
  void scrapeThatWantsNoFamilyOfAnyCollector_readsNoRegion_butRecordsEveryOutcome() {
    Recording a = new Recording("test_a", null, false);
    CollectorChain chain = chainOf(a);

    assertThat(chain.collect(name -> name.equals("other"), null)).isEmpty();

    assertThat(builds).hasValue(0);
    assertThat(a.seen).isEmpty();
    assertThat(stats.outcomes().get("a").success()).isTrue();
  }

  @Test
  void failingCollector_isRecordedOnce_andTheNextOneStillGetsTheSameState() {
    Recording boom = new Recording("test_boom", null, true);
    Recording after = new Recording("test_after", null, false);
    CollectorChain chain = chainOf(boom, after);

    List<Family> page = chain.families();

    assertThat(page)
        .extracting(f -> f.metadata().getPrometheusName())
        .containsExactly("test_after");
    assertThat(stats.outcomes().get("boom").success()).isFalse();
    assertThat(stats.outcomes().get("after").success()).isTrue();
    assertThat(after.seen.getFirst()).isSameAs(boom.seen.getFirst());
    assertThat(builds).hasValue(1);
  }

  /**
   * What the old per-request map (bounded by MAX_SCRAPES_IN_PROGRESS) guarded: scrapes in flight at
   * once each get their own consistent state, and once they return no state is kept, so
   * back-to-back or concurrent scrapes never pile up ~1 MB states.
   */
  @Test
  void concurrentScrapes_eachShareOneStateAcrossCollectors_andNoneIsKeptAfterwards()
      throws Exception {
    int scrapes = 8;
    CyclicBarrier allInFlight = new CyclicBarrier(scrapes);
    Recording first = new Recording("test_first", allInFlight, false);
    Recording boom = new Recording("test_boom", null, true);
    Recording last = new Recording("test_last", null, false);
    CollectorChain chain = chainOf(first, boom, last);

    ExecutorService pool = Executors.newFixedThreadPool(scrapes);
    try {
      List<Future<List<Family>>> done = new ArrayList<>();
      for (int i = 0; i < scrapes; i++) {
        done.add(pool.submit(chain::families));
      }
      for (Future<List<Family>> f : done) {
        assertThat(f.get(60, TimeUnit.SECONDS)).hasSize(2);
      }
    } finally {
      pool.shutdownNow();
    }

    assertThat(builds).hasValue(scrapes);
    Set<NodeState> distinct = Collections.newSetFromMap(new IdentityHashMap<>());
    distinct.addAll(first.seen);
    assertThat(distinct).hasSize(scrapes); // every scrape its own state...
    assertThat(distinct).containsAll(last.seen); // ...seen by every collector of that scrape
    distinct.addAll(boom.seen);
    assertThat(distinct).hasSize(scrapes);

    List<WeakReference<NodeState>> refs = new ArrayList<>();
    for (NodeState s : distinct) {
      refs.add(new WeakReference<>(s));
    }
    distinct.clear();
    first.seen.clear();
    boom.seen.clear();
    last.seen.clear();
    for (int i = 0; i < 50 && refs.stream().anyMatch(r -> r.get() != null); i++) {
      System.gc();
      Thread.sleep(20);
    }
    assertThat(refs)
        .allSatisfy(r -> assertThat(r.get()).as("a state kept after its scrape").isNull());
  }
}
