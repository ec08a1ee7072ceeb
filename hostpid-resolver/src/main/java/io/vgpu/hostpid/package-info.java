/**
 * Maps in-container pids to host pids and host pids to pods, from a procfs tree; the one reader of
 * {@code /proc/<pid>/*} files for the whole exporter.
 *
 * <p>{@link io.vgpu.hostpid.ProcFs} reads one process at a time, every file within a byte bound and
 * never blocking on a FIFO: its NSpid chain, start time and cgroup identity ({@link
 * io.vgpu.hostpid.ProcessInfo}), its user ids, the facts of its {@code maps} that tell GPU use
 * under a vGPU limit ({@link io.vgpu.hostpid.ProcessMaps}) and the variables a caller names from
 * its {@code environ}. {@link io.vgpu.hostpid.HostPidResolver} indexes a whole scan by pod and
 * answers {@code resolve} and {@code ownerOf} from a cache keyed by (host pid, start time). "Not
 * found" is a value ({@link io.vgpu.hostpid.Unresolved}); exceptions are reserved for an unusable
 * procfs root.
 *
 * <p>The parsers live in {@code io.vgpu.hostpid.internal} (not exported); each has property tests
 * over arbitrary bytes. The module depends on nothing of the exporter's. Its test-jar carries the
 * procfs fixture kit ({@code io.vgpu.hostpid.testing.ProcTree}) every module's tests write with.
 */
package io.vgpu.hostpid;
