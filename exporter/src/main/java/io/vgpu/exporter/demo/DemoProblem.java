package io.vgpu.exporter.demo;

import java.nio.charset.StandardCharsets;
import java.util.UUID;

/**
 * The demo's deliberate problems, one pod each, so every surface has something real to show and the
 * operator tools something to fix. Everything else on the demo node is healthy and stays so. The
 * pod carries the label {@value #LABEL}{@code =<id>}.
 */
public enum DemoProblem {
  /** HAMi-core recorded the container pid as host pid (the zero-utilization bug). */
  HOSTPID_WRONG(
      "hostpid-wrong",
      "research",
      "notebook-alice",
      "jupyter",
      "HAMi-core recorded the container pid as host pid: its region reads 0 % SM while NVML sees"
          + " work"),
  /** A slot of a process that is gone still holds memory until {@code cleanup --apply}. */
  ZOMBIE_SLOT(
      "zombie-slots",
      "ml",
      "finetune-bert-2",
      "trainer",
      "a crashed worker's slot still holds memory: cleanup --apply frees it"),
  /** A container at its memory limit whose allocations the library keeps refusing. */
  AT_MEMORY_LIMIT(
      "memory-at-limit",
      "inference",
      "llm-batch-0",
      "server",
      "at its vGPU memory limit, the library refuses allocations (OOM rejections rise)"),
  /** HAMi-core's slot-table lock held by a process that was killed, until {@code unlock}. */
  STUCK_LOCK(
      "lock-dead-holder",
      "research",
      "hparam-sweep-4",
      "worker",
      "its slot-table lock is held by a killed process: unlock --apply releases it");

  /** The pod label that names a demo pod's deliberate problem. */
  public static final String LABEL = "demo.vgpu.io/problem";

  private final String id;
  private final String namespace;
  private final String pod;
  private final String container;
  private final String what;

  DemoProblem(String id, String namespace, String pod, String container, String what) {
    this.id = id;
    this.namespace = namespace;
    this.pod = pod;
    this.container = container;
    this.what = what;
  }

  public String id() {
    return id;
  }

  public String namespace() {
    return namespace;
  }

  public String pod() {
    return pod;
  }

  public String container() {
    return container;
  }

  public String what() {
    return what;
  }

  /** The pod UID the demo gives this problem's pod (stable across runs). */
  public String podUid() {
    return podUidOf(pod);
  }

  /** The stable pod UID the demo gives the pod named {@code pod}. */
  static String podUidOf(String pod) {
    return UUID.nameUUIDFromBytes(("demo-" + pod).getBytes(StandardCharsets.UTF_8)).toString();
  }
}
