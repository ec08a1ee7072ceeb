/**
 * The demo node: made-up containers with real region files, a fake procfs and a script for the fake
 * NVML library, for {@code vgpu-exporter demo} and the docs' screenshots.
 */
package io.vgpu.exporter.demo;
