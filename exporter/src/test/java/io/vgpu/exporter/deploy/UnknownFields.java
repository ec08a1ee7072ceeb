package io.vgpu.exporter.deploy;

import io.fabric8.kubernetes.api.model.GenericKubernetesResource;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * Finds fields fabric8 did not recognise. Its model keeps unknown YAML keys in additionalProperties
 * instead of failing, so a misspelt key ("readonly", "hostPid") would parse and be silently ignored
 * by the API server; this walk turns that into a test failure.
 */
final class UnknownFields {
  private UnknownFields() {}

  /** Paths like {@code spec.template.spec.containers[0].securityContext.readonly}. */
  static List<String> in(Object root) {
    List<String> found = new ArrayList<>();
    walk(root, "", found, new IdentityHashMap<>());
    return found;
  }

  private static void walk(Object o, String path, List<String> found, Map<Object, Boolean> seen) {
    if (o == null || seen.put(o, Boolean.TRUE) != null) {
      return;
    }
    if (o instanceof Collection<?> c) {
      int i = 0;
      for (Object e : c) {
        walk(e, path + "[" + i++ + "]", found, seen);
      }
      return;
    }
    if (o instanceof Map<?, ?> m) {
      for (Map.Entry<?, ?> e : m.entrySet()) {
        walk(e.getValue(), path + "[" + e.getKey() + "]", found, seen);
      }
      return;
    }
    if (o instanceof GenericKubernetesResource
        || !o.getClass().getName().startsWith("io.fabric8.kubernetes.api.model")) {
      return;
    }
    for (Method m : o.getClass().getMethods()) {
      if (m.getParameterCount() != 0
          || Modifier.isStatic(m.getModifiers())
          || !m.getName().startsWith("get")
          || m.getDeclaringClass() == Object.class) {
        continue;
      }
      Object value;
      try {
        value = m.invoke(o);
      } catch (IllegalAccessException | InvocationTargetException e) {
        continue;
      }
      String name = decapitalize(m.getName().substring(3));
      if (m.getName().equals("getAdditionalProperties") && value instanceof Map<?, ?> extra) {
        for (Object key : extra.keySet()) {
          found.add(path.isEmpty() ? key.toString() : path + "." + key);
        }
      } else {
        walk(value, path.isEmpty() ? name : path + "." + name, found, seen);
      }
    }
  }

  private static String decapitalize(String s) {
    return s.isEmpty() ? s : Character.toLowerCase(s.charAt(0)) + s.substring(1);
  }
}
