/**
 * Reads and writes HAMi-core shared-region cache files. Only {@code io.vgpu.regioncodec} is API;
 * {@code io.vgpu.regioncodec.internal} holds offsets, detection and the reader and is not exported.
 * Opening goes through {@link io.vgpu.regioncodec.SafeOpen} ({@code openat2}/{@code openat} through
 * the FFM linker, no link followed, {@code O_PATH} before the type check): grant native access to
 * this module ({@code --enable-native-access=io.vgpu.regioncodec}, or {@code ALL-UNNAMED} on the
 * class path) to avoid the JDK's restricted-method warning.
 */
module io.vgpu.regioncodec {
  exports io.vgpu.regioncodec;
}
