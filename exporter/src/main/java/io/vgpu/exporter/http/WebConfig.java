package io.vgpu.exporter.http;

import io.vgpu.exporter.config.ConfigException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import tools.jackson.core.JacksonException;
import tools.jackson.databind.JsonNode;
import tools.jackson.dataformat.yaml.YAMLMapper;

/**
 * {@code --web.config.file}: the Prometheus exporter-toolkit web configuration, the subset this
 * exporter serves: {@code tls_server_config} ({@code cert_file}, {@code key_file}, {@code
 * client_ca_file}, {@code client_auth_type}, {@code min_version}, {@code max_version}) and {@code
 * basic_auth_users} (user: bcrypt hash). Anything else in the file is refused at start rather than
 * silently ignored: an option that would restrict access (say {@code client_allowed_sans}) must
 * never be dropped without notice. Relative paths are resolved against the file's directory, as the
 * toolkit does.
 *
 * @param tls TLS settings, when the file has a {@code tls_server_config}
 * @param users user name to bcrypt hash; empty means no authentication
 */
public record WebConfig(Optional<Tls> tls, Map<String, String> users) {
  public WebConfig {
    users = Map.copyOf(users);
  }

  /** No TLS, no authentication (no file given). */
  public static WebConfig none() {
    return new WebConfig(Optional.empty(), Map.of());
  }

  /** Go's tls.ClientAuthType names, as the toolkit spells them. */
  public enum ClientAuth {
    NO_CLIENT_CERT("NoClientCert", false, false, false),
    REQUEST_CLIENT_CERT("RequestClientCert", true, false, false),
    REQUIRE_ANY_CLIENT_CERT("RequireAnyClientCert", true, true, false),
    VERIFY_CLIENT_CERT_IF_GIVEN("VerifyClientCertIfGiven", true, false, true),
    REQUIRE_AND_VERIFY_CLIENT_CERT("RequireAndVerifyClientCert", true, true, true);

    final String yaml;
    final boolean want;
    final boolean need;
    final boolean verify;

    ClientAuth(String yaml, boolean want, boolean need, boolean verify) {
      this.yaml = yaml;
      this.want = want;
      this.need = need;
      this.verify = verify;
    }

    static ClientAuth parse(String s) {
      for (ClientAuth a : values()) {
        if (a.yaml.equals(s)) {
          return a;
        }
      }
      throw new ConfigException(
          "web config: client_auth_type "
              + s
              + " is not one of NoClientCert, RequestClientCert, RequireAnyClientCert,"
              + " VerifyClientCertIfGiven, RequireAndVerifyClientCert");
    }
  }

  /**
   * @param certFile PEM certificate chain, server certificate first
   * @param keyFile PEM private key (PKCS#8 "PRIVATE KEY", or PKCS#1 "RSA PRIVATE KEY")
   * @param clientCaFile PEM CA certificates that client certificates must chain to, if any
   * @param clientAuth whether and how client certificates are asked for and checked
   * @param minVersion lowest protocol, e.g. TLSv1.2
   * @param maxVersion highest protocol, or empty for the JDK's highest
   */
  public record Tls(
      Path certFile,
      Path keyFile,
      Optional<Path> clientCaFile,
      ClientAuth clientAuth,
      String minVersion,
      Optional<String> maxVersion) {}

  private static final Set<String> TOP = Set.of("tls_server_config", "basic_auth_users");
  private static final Set<String> TLS_KEYS =
      Set.of(
          "cert_file",
          "key_file",
          "client_ca_file",
          "client_auth_type",
          "min_version",
          "max_version");
  private static final Map<String, String> VERSIONS =
      Map.of("TLS10", "TLSv1", "TLS11", "TLSv1.1", "TLS12", "TLSv1.2", "TLS13", "TLSv1.3");

  /** Reads and checks the file; every problem is a {@link ConfigException} naming it. */
  public static WebConfig load(Path file) {
    JsonNode root;
    try {
      root = new YAMLMapper().readTree(Files.readString(file));
    } catch (IOException | JacksonException e) {
      throw new ConfigException("cannot read --web.config.file " + file + ": " + e.getMessage());
    }
    if (root == null || root.isNull() || root.isMissingNode()) {
      return none();
    }
    if (!root.isObject()) {
      throw new ConfigException("web config " + file + ": expected a mapping at the top");
    }
    checkKeys(root, TOP, "");
    Path dir = file.toAbsolutePath().getParent();
    Optional<Tls> tls = Optional.empty();
    JsonNode t = root.get("tls_server_config");
    if (t != null && !t.isNull()) {
      checkKeys(t, TLS_KEYS, "tls_server_config.");
      Path cert = requiredPath(t, "cert_file", dir);
      Path key = requiredPath(t, "key_file", dir);
      Optional<Path> ca = optionalText(t, "client_ca_file").map(dir::resolve);
      ClientAuth auth =
          optionalText(t, "client_auth_type")
              .map(ClientAuth::parse)
              .orElse(
                  ca.isPresent()
                      ? ClientAuth.REQUIRE_AND_VERIFY_CLIENT_CERT
                      : ClientAuth.NO_CLIENT_CERT);
      if (auth.verify && ca.isEmpty()) {
        throw new ConfigException(
            "web config: client_auth_type " + auth.yaml + " needs client_ca_file");
      }
      String min = version(optionalText(t, "min_version").orElse("TLS12"));
      Optional<String> max = optionalText(t, "max_version").map(WebConfig::version);
      tls = Optional.of(new Tls(cert, key, ca, auth, min, max));
    }
    Map<String, String> users = new LinkedHashMap<>();
    JsonNode u = root.get("basic_auth_users");
    if (u != null && !u.isNull()) {
      if (!u.isObject()) {
        throw new ConfigException("web config: basic_auth_users must map user names to hashes");
      }
      for (Map.Entry<String, JsonNode> e : u.properties()) {
        String hash = e.getValue().isString() ? e.getValue().asString() : "";
        if (!BasicAuth.isBcryptHash(hash)) {
          throw new ConfigException(
              "web config: basic_auth_users."
                  + e.getKey()
                  + " is not a bcrypt hash ($2a$/$2b$/$2y$)");
        }
        int cost = BasicAuth.cost(hash);
        if (cost < BasicAuth.MIN_COST || cost > BasicAuth.MAX_COST) {
          throw new ConfigException(
              "web config: basic_auth_users."
                  + e.getKey()
                  + " has bcrypt cost "
                  + cost
                  + "; accepted: "
                  + BasicAuth.costRange()
                  + " (each check costs 2^cost rounds: about 1 s of a core at 14, doubling per"
                  + " step, so a higher cost lets anyone who can reach the port busy the exporter;"
                  + " rehash, e.g. htpasswd -nbB -C 12 USER PASSWORD)");
        }
        users.put(e.getKey(), hash);
      }
    }
    return new WebConfig(tls, users);
  }

  private static String version(String v) {
    String jdk = VERSIONS.get(v.toUpperCase(Locale.ROOT));
    if (jdk == null) {
      throw new ConfigException(
          "web config: TLS version "
              + v
              + " is not one of "
              + List.copyOf(VERSIONS.keySet().stream().sorted().toList()));
    }
    return jdk;
  }

  private static void checkKeys(JsonNode node, Set<String> allowed, String prefix) {
    if (!node.isObject()) {
      throw new ConfigException("web config: " + prefix + " must be a mapping");
    }
    for (String k : node.propertyNames()) {
      if (!allowed.contains(k)) {
        throw new ConfigException(
            "web config: "
                + prefix
                + k
                + " is not supported by this exporter (supported: "
                + allowed.stream().sorted().toList()
                + ")");
      }
    }
  }

  private static Optional<String> optionalText(JsonNode node, String key) {
    JsonNode v = node.get(key);
    if (v == null || v.isNull() || v.asString("").isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(v.asString());
  }

  private static Path requiredPath(JsonNode node, String key, Path dir) {
    return dir.resolve(
        optionalText(node, key)
            .orElseThrow(
                () ->
                    new ConfigException("web config: tls_server_config." + key + " is required")));
  }
}
