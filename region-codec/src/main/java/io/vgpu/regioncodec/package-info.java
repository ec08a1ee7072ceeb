/**
 * Reads and writes HAMi-core shared-region cache files: {@link io.vgpu.regioncodec.RegionFile} maps
 * a file and takes consistent {@link io.vgpu.regioncodec.RegionSnapshot}s, {@link
 * io.vgpu.regioncodec.RegionWriter} creates files and updates single fields, and {@link
 * io.vgpu.regioncodec.RegionException} is the one (sealed) failure type. JDK only.
 */
package io.vgpu.regioncodec;
