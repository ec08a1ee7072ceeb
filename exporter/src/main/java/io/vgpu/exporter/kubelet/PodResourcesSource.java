package io.vgpu.exporter.kubelet;

import io.vgpu.exporter.k8s.ProblemLog;
import io.vgpu.kubelet.podresources.v1.AllocatableResourcesResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.InstantSource;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Polls the kubelet's pod-resources API in the background and keeps the latest answer for scrapes
 * ({@link #state()} never blocks). Every call has a deadline; a failing socket is retried with
 * exponential back-off (interval, 2×, 4× … up to {@link #MAX_BACKOFF}) and reported by one WARN
 * line with its own back-off, and as the /readyz reason. An answer older than {@code maxAge} is
 * dropped, so a kubelet gone for long does not keep attributing devices of pods since deleted.
 */
public final class PodResourcesSource implements AutoCloseable {
  static final Duration MAX_BACKOFF = Duration.ofMinutes(1);
  static final int FIRST_CALL_DEADLINE_FACTOR = 5;
  private static final Logger LOG = LoggerFactory.getLogger(PodResourcesSource.class);

  private final Path socket;
  private final Duration interval;
  private final Duration timeout;
  private final Duration maxAge;
  private final PodResourcesLimits limits;
  private final InstantSource clock;
  private final ProblemLog problems;
  private final String node;
  private final AtomicReference<PodResourcesState> state =
      new AtomicReference<>(
          new PodResourcesState(true, Optional.empty(), Optional.of("first poll not finished")));
  private final ScheduledExecutorService executor;
  private PodResourcesClient client; // poll thread only
  private int failures; // poll thread only
  private volatile boolean closed;

  /**
   * @param socket the kubelet's pod-resources socket
   * @param interval time between polls while the kubelet answers
   * @param timeout deadline of each call
   * @param node this node's name, for the log lines
   */
  public PodResourcesSource(
      Path socket,
      Duration interval,
      Duration timeout,
      PodResourcesLimits limits,
      InstantSource clock,
      String node) {
    this.socket = Objects.requireNonNull(socket, "socket");
    this.interval = interval;
    this.timeout = timeout;
    this.maxAge = interval.multipliedBy(3).plus(timeout.multipliedBy(2));
    this.limits = Objects.requireNonNull(limits, "limits");
    this.clock = Objects.requireNonNull(clock, "clock");
    this.problems = new ProblemLog(LOG, "kubelet pod-resources unreachable", System::nanoTime);
    this.node = Objects.requireNonNull(node, "node");
    this.executor =
        Executors.newSingleThreadScheduledExecutor(
            r -> {
              Thread t = new Thread(r, "pod-resources-poll");
              t.setDaemon(true);
              return t;
            });
  }

  /** Starts polling now. */
  public void start() {
    executor.execute(this::pollAndReschedule);
  }

  /** The latest answer and problem; cheap, never blocks. */
  public PodResourcesState state() {
    var s = state.get();
    if (s.snapshot().isPresent()
        && Duration.between(s.snapshot().get().fetchedAt(), clock.instant()).compareTo(maxAge)
            > 0) {
      return new PodResourcesState(
          true,
          Optional.empty(),
          Optional.of(s.problem().orElse("latest answer older than " + maxAge.toSeconds() + "s")));
    }
    return s;
  }

  public Path socket() {
    return socket;
  }

  private void pollAndReschedule() {
    if (closed) {
      return;
    }
    Duration next;
    try {
      next = pollOnce() ? interval : backoff();
    } catch (RuntimeException e) { // never let the poll thread die
      LOG.atError().setMessage("pod-resources poll failed").setCause(e).log();
      next = backoff();
    }
    if (!closed) {
      var _ = executor.schedule(this::pollAndReschedule, next.toNanos(), TimeUnit.NANOSECONDS);
    }
  }

  private Duration backoff() {
    int shift = Math.min(failures - 1, 16);
    Duration d = interval.multipliedBy(1L << Math.max(shift, 0));
    return d.compareTo(MAX_BACKOFF) > 0 ? MAX_BACKOFF : d;
  }

  /** One poll; true when the kubelet answered List. */
  boolean pollOnce() {
    Optional<String> missing = socketProblem();
    if (missing.isPresent()) {
      fail(missing.get());
      return false;
    }
    try {
      // A new channel's first call also loads gRPC and netty and connects: on a loaded node that
      // alone can take seconds, so it gets a longer deadline than a warm call.
      Duration deadline = timeout;
      if (client == null) {
        client = new PodResourcesClient(socket, limits.maxMessageBytes());
        deadline = timeout.multipliedBy(FIRST_CALL_DEADLINE_FACTOR);
      }
      var list = client.list(deadline);
      Optional<AllocatableResourcesResponse> alloc;
      Optional<String> partial = Optional.empty();
      try {
        alloc = Optional.of(client.allocatable(timeout));
      } catch (RuntimeException e) { // older kubelets lack it (feature gate): List still counts
        alloc = Optional.empty();
        partial = Optional.of("GetAllocatableResources: " + PodResourcesClient.describe(e));
      }
      var snap = AssignmentReader.read(list, alloc, limits, clock.instant());
      if (snap.truncated() && partial.isEmpty()) {
        partial = Optional.of("answer over the limits (" + limits + "): the rest was not read");
      }
      failures = 0;
      problems.recovered(node);
      state.set(new PodResourcesState(true, Optional.of(snap), partial));
      return true;
    } catch (IllegalStateException e) { // no epoll transport: permanent
      fail(e.getMessage());
      return false;
    } catch (RuntimeException e) {
      fail(PodResourcesClient.describe(e));
      return false;
    }
  }

  private Optional<String> socketProblem() {
    if (!Files.exists(socket)) {
      return Optional.of(socket + " missing (kubelet down, or the hostPath not mounted)");
    }
    if (!Files.isWritable(socket)) {
      // connect(2) on a unix socket needs write permission; the kubelet creates it for root.
      return Optional.of(
          socket
              + " not writable by this user: connecting needs write permission on the socket,"
              + " which the kubelet gives root only");
    }
    return Optional.empty();
  }

  private void fail(String problem) {
    failures++;
    problems.problem(
        node,
        socket + ": " + problem,
        "mount the kubelet's pod-resources directory read-only, run as a user that may connect"
            + " to its socket, or set --kubelet.pod-resources-socket= to turn this off");
    var previous = state.get().snapshot();
    state.set(new PodResourcesState(true, previous, Optional.of(problem)));
  }

  @Override
  public void close() {
    closed = true;
    executor.shutdownNow();
    try {
      executor.awaitTermination(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (client != null) {
      client.close();
    }
  }
}
