/**
 * Maps in-container pids to host pids and host pids to pods, from a procfs tree.
 *
 * <p>{@link io.vgpu.hostpid.ProcFs} reads one process at a time (NSpid chain, start time, cgroup
 * identity); {@link io.vgpu.hostpid.HostPidResolver} indexes a whole scan by pod and answers {@code
 * resolve} and {@code ownerOf} from a cache keyed by (host pid, start time). "Not found" is a value
 * ({@link io.vgpu.hostpid.Unresolved}); exceptions are reserved for an unusable procfs root.
 */
package io.vgpu.hostpid;
