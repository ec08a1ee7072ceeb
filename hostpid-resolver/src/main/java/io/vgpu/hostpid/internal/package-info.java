/** Parsers and file reading behind {@link io.vgpu.hostpid.ProcFs}; not part of the API. */
package io.vgpu.hostpid.internal;
