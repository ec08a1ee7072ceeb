/** Offsets, detection, the snapshot algorithm and file opening; not an API. */
package io.vgpu.regioncodec.internal;
