package io.vgpu.hostpid;

import java.util.List;
import java.util.Set;

/**
 * The few facts of a process's {@code /proc/<pid>/maps} that tell whether it uses the GPU under a
 * vGPU limit, from one bounded read ({@link ProcFs#readMaps}).
 *
 * @param vgpu every mapping whose file name contains {@code libvgpu}, as {@code "<path>
 *     (<dev>:<inode>)"}, sorted
 * @param cacheInodes inodes of mapped {@code *.cache} files (shared regions)
 * @param gpu a {@code libcuda.so*} or {@code libnvidia-ml.so*} is mapped
 * @param bytesRead bytes read (what the read cost a caller's budget)
 * @param readable the file could be opened and read
 * @param complete read to its end within the bound: every mapping was seen. A read that stopped at
 *     its bound is never complete (the mapping a caller looks for may be on the next line)
 */
public record ProcessMaps(
    List<String> vgpu,
    Set<Long> cacheInodes,
    boolean gpu,
    int bytesRead,
    boolean readable,
    boolean complete) {}
