package io.vgpu.exporter.nvml;

/**
 * One NVML function called by name through the loaded library's symbol table: its return code, or
 * {@link NvmlReturn#FUNCTION_NOT_FOUND} when the library lacks the symbol.
 */
@FunctionalInterface
interface NativeCall {
  NvmlReturn invoke(String function, Object... args);
}
