package io.vgpu.exporter.nvml;

import java.util.Objects;
import java.util.function.Function;

/**
 * The outcome of one NVML query: a value, or the return code and the function that gave it.
 * Failures are values here because they are expected (no driver, unsupported query, lost GPU).
 */
public sealed interface NvmlResult<T> permits NvmlResult.Ok, NvmlResult.Err {

  /** A successful query. */
  record Ok<T>(T value) implements NvmlResult<T> {
    public Ok {
      Objects.requireNonNull(value, "value");
    }
  }

  /** A failed query: which NVML function returned which code. */
  record Err<T>(String function, NvmlReturn code) implements NvmlResult<T> {
    public Err {
      Objects.requireNonNull(function, "function");
      Objects.requireNonNull(code, "code");
      if (code.isSuccess()) {
        throw new IllegalArgumentException("an Err needs a failure code, got " + code);
      }
    }

    /** The same failure typed for another value. */
    public <U> Err<U> cast() {
      return new Err<>(function, code);
    }
  }

  static <T> NvmlResult<T> ok(T value) {
    return new Ok<>(value);
  }

  static <T> NvmlResult<T> err(String function, NvmlReturn code) {
    return new Err<>(function, code);
  }

  default boolean isOk() {
    return this instanceof Ok;
  }

  default <U> NvmlResult<U> map(Function<? super T, ? extends U> f) {
    return switch (this) {
      case Ok<T> ok -> new Ok<>(f.apply(ok.value()));
      case Err<T> err -> err.cast();
    };
  }

  /** The value, or {@code fallback} on failure. */
  default T orElse(T fallback) {
    return this instanceof Ok<T> ok ? ok.value() : fallback;
  }
}
