/**
 * Resolves container pids to host pids through /proc (NSpid, stat start time, cgroup ownership).
 * Only {@code io.vgpu.hostpid} is API; {@code io.vgpu.hostpid.internal} holds the parsers and the
 * process index and is not exported.
 */
module io.vgpu.hostpid {
  requires com.github.benmanes.caffeine;

  exports io.vgpu.hostpid;
}
