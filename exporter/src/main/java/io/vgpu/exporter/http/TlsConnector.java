package io.vgpu.exporter.http;

import io.vgpu.exporter.config.ConfigException;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.eclipse.jetty.server.HttpConfiguration;
import org.eclipse.jetty.server.HttpConnectionFactory;
import org.eclipse.jetty.server.SecureRequestCustomizer;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.ssl.SslContextFactory;

/** A Jetty HTTPS connector from {@link WebConfig.Tls}: PEM files, as Prometheus exporters use. */
final class TlsConnector {
  private static final Pattern PEM =
      Pattern.compile("-----BEGIN ([A-Z ]+)-----([A-Za-z0-9+/=\\s]+)-----END \\1-----");

  private TlsConnector() {}

  static ServerConnector create(Server server, HttpConfiguration base, WebConfig.Tls tls) {
    SslContextFactory.Server ssl = new SslContextFactory.Server();
    ssl.setKeyStore(keyStore(tls.certFile(), tls.keyFile()));
    ssl.setKeyStorePassword("");
    ssl.setIncludeProtocols(protocols(tls));
    WebConfig.ClientAuth auth = tls.clientAuth();
    ssl.setWantClientAuth(auth.want);
    ssl.setNeedClientAuth(auth.need);
    if (auth.verify) {
      ssl.setTrustStore(trustStore(tls.clientCaFile().orElseThrow()));
    } else if (auth.want) {
      ssl.setTrustAll(true); // RequestClientCert / RequireAnyClientCert: any certificate, unchecked
    }
    HttpConfiguration https = new HttpConfiguration(base);
    SecureRequestCustomizer secure = new SecureRequestCustomizer();
    // Prometheus scrapes by pod IP; Go's server does not compare the Host with the certificate.
    secure.setSniHostCheck(false);
    https.addCustomizer(secure);
    return new ServerConnector(server, ssl, new HttpConnectionFactory(https));
  }

  private static String[] protocols(WebConfig.Tls tls) {
    List<String> all = List.of("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3");
    int lo = all.indexOf(tls.minVersion());
    int hi = tls.maxVersion().map(all::indexOf).orElse(all.size() - 1);
    if (hi < lo) {
      throw new ConfigException("web config: max_version is below min_version");
    }
    return all.subList(lo, hi + 1).toArray(String[]::new);
  }

  private static KeyStore keyStore(Path certFile, Path keyFile) {
    List<Certificate> chain = certificates(certFile);
    if (chain.isEmpty()) {
      throw new ConfigException("web config: no certificate in cert_file " + certFile);
    }
    PrivateKey key = privateKey(keyFile);
    try {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      ks.load(null, null);
      ks.setKeyEntry("server", key, new char[0], chain.toArray(Certificate[]::new));
      return ks;
    } catch (GeneralSecurityException | IOException e) {
      throw new ConfigException("web config: cert_file and key_file do not fit: " + e.getMessage());
    }
  }

  private static KeyStore trustStore(Path caFile) {
    List<Certificate> cas = certificates(caFile);
    if (cas.isEmpty()) {
      throw new ConfigException("web config: no certificate in client_ca_file " + caFile);
    }
    try {
      KeyStore ks = KeyStore.getInstance("PKCS12");
      ks.load(null, null);
      for (int i = 0; i < cas.size(); i++) {
        ks.setCertificateEntry("ca" + i, cas.get(i));
      }
      return ks;
    } catch (GeneralSecurityException | IOException e) {
      throw new ConfigException("web config: client_ca_file " + caFile + ": " + e.getMessage());
    }
  }

  private static List<Certificate> certificates(Path file) {
    List<Certificate> out = new ArrayList<>();
    try {
      CertificateFactory cf = CertificateFactory.getInstance("X.509");
      for (byte[] der : blocks(file, "CERTIFICATE")) {
        out.add(cf.generateCertificate(new ByteArrayInputStream(der)));
      }
    } catch (GeneralSecurityException e) {
      throw new ConfigException("web config: bad certificate in " + file + ": " + e.getMessage());
    }
    return out;
  }

  private static PrivateKey privateKey(Path file) {
    List<byte[]> pkcs8 = blocks(file, "PRIVATE KEY");
    List<byte[]> pkcs1 = blocks(file, "RSA PRIVATE KEY");
    byte[] der;
    if (!pkcs8.isEmpty()) {
      der = pkcs8.getFirst();
    } else if (!pkcs1.isEmpty()) {
      der = rsaPkcs1ToPkcs8(pkcs1.getFirst());
    } else {
      throw new ConfigException(
          "web config: key_file "
              + file
              + " holds no unencrypted PEM \"PRIVATE KEY\" (PKCS#8) or \"RSA PRIVATE KEY\";"
              + " convert with: openssl pkcs8 -topk8 -nocrypt -in KEY -out KEY.pk8");
    }
    for (String alg : List.of("RSA", "EC", "Ed25519", "EdDSA")) {
      try {
        return KeyFactory.getInstance(alg).generatePrivate(new PKCS8EncodedKeySpec(der));
      } catch (GeneralSecurityException e) {
        // try the next algorithm
      }
    }
    throw new ConfigException("web config: key_file " + file + ": unsupported key algorithm");
  }

  /** Wraps a PKCS#1 RSAPrivateKey in a PKCS#8 PrivateKeyInfo (version 0, rsaEncryption). */
  private static byte[] rsaPkcs1ToPkcs8(byte[] pkcs1) {
    byte[] algId = {
      0x30,
      0x0d,
      0x06,
      0x09,
      0x2a,
      (byte) 0x86,
      0x48,
      (byte) 0x86,
      (byte) 0xf7,
      0x0d,
      0x01,
      0x01,
      0x01,
      0x05,
      0x00
    };
    byte[] version = {0x02, 0x01, 0x00};
    byte[] octets = der(0x04, pkcs1);
    byte[] body = new byte[version.length + algId.length + octets.length];
    System.arraycopy(version, 0, body, 0, version.length);
    System.arraycopy(algId, 0, body, version.length, algId.length);
    System.arraycopy(octets, 0, body, version.length + algId.length, octets.length);
    return der(0x30, body);
  }

  private static byte[] der(int tag, byte[] content) {
    int n = content.length;
    byte[] len;
    if (n < 0x80) {
      len = new byte[] {(byte) n};
    } else if (n < 0x100) {
      len = new byte[] {(byte) 0x81, (byte) n};
    } else if (n < 0x10000) {
      len = new byte[] {(byte) 0x82, (byte) (n >> 8), (byte) n};
    } else {
      len = new byte[] {(byte) 0x83, (byte) (n >> 16), (byte) (n >> 8), (byte) n};
    }
    byte[] out = new byte[1 + len.length + n];
    out[0] = (byte) tag;
    System.arraycopy(len, 0, out, 1, len.length);
    System.arraycopy(content, 0, out, 1 + len.length, n);
    return out;
  }

  private static List<byte[]> blocks(Path file, String type) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.US_ASCII);
    } catch (IOException e) {
      throw new ConfigException("web config: cannot read " + file + ": " + e.getMessage());
    }
    List<byte[]> out = new ArrayList<>();
    Matcher m = PEM.matcher(text);
    while (m.find()) {
      if (m.group(1).equals(type)) {
        try {
          out.add(Base64.getMimeDecoder().decode(m.group(2)));
        } catch (IllegalArgumentException e) {
          throw new ConfigException("web config: bad base64 in " + file);
        }
      }
    }
    return out;
  }
}
