/**
 * The picocli commands ({@code serve}, {@code demo}, {@code inspect}, {@code doctor}, {@code
 * cleanup}, {@code unlock}, {@code version}), flag parsing from {@link
 * io.vgpu.exporter.config.Flags#ALL} and log setup.
 */
package io.vgpu.exporter.cli;
