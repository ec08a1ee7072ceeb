package io.vgpu.exporter.node;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads of files a tenant can stall, each on a reader thread with a deadline, so the judging thread
 * (or a CLI command) never waits for ever: {@code /proc/<pid>/maps} and {@code environ} wait for
 * the process's memory-map lock, which a tenant can keep taken (a fault on a userfaultfd region
 * with a writer queued behind it), and a file below its root may sit on a filesystem it serves. A
 * read that misses its deadline is given up: its thread may stay blocked (uninterruptibly) and is
 * left behind, so at most {@link #MAX_STALLED_PER_POD} of one pod's reads and {@link #MAX_READERS}
 * in all may be outstanding; past that a pod's reads are given up at once. Thread-safe.
 */
public final class DeadlineReads {
  private static final Logger LOG = LoggerFactory.getLogger(DeadlineReads.class);

  /** How long one tenant file may take before it is given up. */
  public static final Duration DEFAULT_DEADLINE = Duration.ofSeconds(2);

  /** Reader threads at most (stalled ones included). */
  static final int MAX_READERS = 16;

  /** Outstanding (stalled) reads of one pod at most; its further reads are given up at once. */
  static final int MAX_STALLED_PER_POD = 2;

  private static final DeadlineReads SHARED = new DeadlineReads(DEFAULT_DEADLINE);

  private final Duration deadline;
  private final ThreadPoolExecutor readers;

  /** Reads in flight per pod; a pod with none has no entry (pods come and go for months). */
  private final ConcurrentHashMap<String, Integer> outstanding = new ConcurrentHashMap<>();

  private final LongAdder givenUp = new LongAdder();
  private final java.util.function.Consumer<Path> beforeRead;

  public DeadlineReads(Duration deadline) {
    this(deadline, file -> {});
  }

  /**
   * @param beforeRead runs on the reader thread before each read of a file (tests stand a
   *     never-returning read of a frozen filesystem in for it here: this machine cannot freeze one)
   */
  DeadlineReads(Duration deadline, java.util.function.Consumer<Path> beforeRead) {
    this.deadline = deadline;
    this.beforeRead = beforeRead;
    AtomicInteger n = new AtomicInteger();
    this.readers =
        new ThreadPoolExecutor(
            0,
            MAX_READERS,
            30,
            TimeUnit.SECONDS,
            new SynchronousQueue<>(),
            r ->
                Thread.ofPlatform()
                    .daemon()
                    .name("tenant-read-" + n.incrementAndGet())
                    .unstarted(r));
  }

  /** The process-wide instance (the evidence pass, the status page and CLI commands share it). */
  public static DeadlineReads shared() {
    return SHARED;
  }

  /** Reads given up since start (deadline passed, or too many of the pod's reads outstanding). */
  public long givenUp() {
    return givenUp.sum();
  }

  /** Reader threads still blocked in a given-up read (or running one now). */
  public int outstanding() {
    return readers.getActiveCount();
  }

  /**
   * Runs {@code read} of {@code file} (a file of {@code pod}'s) with the deadline. Empty when it
   * was given up: the caller counts what it did not see as not seen, never as absent.
   */
  public <T> Optional<T> read(String pod, Path file, Callable<T> read) {
    if (!reserve(pod)) {
      return gaveUp(file, "earlier reads of this pod's files are still blocked");
    }
    Future<T> f;
    try {
      f =
          readers.submit(
              () -> {
                try {
                  beforeRead.accept(file);
                  return read.call();
                } finally {
                  release(pod);
                }
              });
    } catch (RejectedExecutionException e) {
      release(pod);
      return gaveUp(file, "every reader thread is blocked in an earlier read");
    }
    try {
      return Optional.ofNullable(f.get(deadline.toNanos(), TimeUnit.NANOSECONDS));
    } catch (TimeoutException e) {
      // Never cancel(true): interrupting a thread blocked in a FileChannel read closes the
      // channel, and that close waits for the read to leave the kernel, which a read on a frozen
      // filesystem never does: the caller (the judging thread) would block in the interrupt.
      f.cancel(false);
      return gaveUp(file, "no answer within " + deadline.toMillis() + " ms");
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return gaveUp(file, "interrupted");
    } catch (ExecutionException e) {
      return gaveUp(file, "failed: " + e.getCause());
    }
  }

  /** Counts one more read of {@code pod} in flight; false when it has the most already. */
  private boolean reserve(String pod) {
    boolean[] reserved = {false};
    outstanding.compute(
        pod,
        (k, n) -> {
          int now = n == null ? 0 : n;
          if (now >= MAX_STALLED_PER_POD) {
            return n;
          }
          reserved[0] = true;
          return now + 1;
        });
    return reserved[0];
  }

  private void release(String pod) {
    outstanding.computeIfPresent(pod, (k, n) -> n <= 1 ? null : n - 1);
  }

  /** Pods with a read in flight (tests: entries do not outlive their reads). */
  int podsWithReadsInFlight() {
    return outstanding.size();
  }

  private <T> Optional<T> gaveUp(Path file, String why) {
    givenUp.increment();
    LOG.atWarn()
        .setMessage("gave up reading a tenant file; its pod is judged UNKNOWN, never GONE")
        .addKeyValue("file", file)
        .addKeyValue("why", why)
        .log();
    return Optional.empty();
  }
}
