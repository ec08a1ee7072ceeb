/**
 * The doctor engine: the checks over the node's evidence, each with a verdict, and the inspection
 * and repair planning the operator commands ({@code doctor}, {@code inspect}, {@code cleanup},
 * {@code unlock}) print or carry out.
 */
package io.vgpu.exporter.doctor;
