package io.vgpu.exporter.http;

import io.javalin.http.Context;
import io.prometheus.metrics.exporter.common.PrometheusHttpExchange;
import io.prometheus.metrics.exporter.common.PrometheusHttpRequest;
import io.prometheus.metrics.exporter.common.PrometheusHttpResponse;
import java.io.IOException;
import java.io.OutputStream;
import java.util.Collections;
import java.util.Enumeration;

/** Adapts a Javalin request to client_java's scrape handler (content negotiation, gzip, name[]). */
final class JavalinExchange implements PrometheusHttpExchange {
  private final Context ctx;
  private final Request request = new Request();
  private final Response response = new Response();

  JavalinExchange(Context ctx) {
    this.ctx = ctx;
  }

  @Override
  public PrometheusHttpRequest getRequest() {
    return request;
  }

  @Override
  public PrometheusHttpResponse getResponse() {
    return response;
  }

  @Override
  public void handleException(IOException e) throws IOException {
    throw e;
  }

  @Override
  public void handleException(RuntimeException e) {
    throw e;
  }

  @Override
  public void close() {}

  /** One per scrape: collectors share the scrape's NodeState by this object's identity. */
  private final class Request implements PrometheusHttpRequest {
    @Override
    public String getQueryString() {
      return ctx.queryString();
    }

    @Override
    public Enumeration<String> getHeaders(String name) {
      Enumeration<String> h = ctx.req().getHeaders(name);
      return h == null ? Collections.emptyEnumeration() : h;
    }

    @Override
    public String getMethod() {
      return ctx.req().getMethod();
    }

    @Override
    public String getRequestPath() {
      return ctx.path();
    }
  }

  private final class Response implements PrometheusHttpResponse {
    @Override
    public void setHeader(String name, String value) {
      ctx.header(name, value);
    }

    @Override
    public OutputStream sendHeadersAndGetBody(int statusCode, int contentLength)
        throws IOException {
      ctx.status(statusCode);
      if (contentLength > 0) {
        ctx.res().setContentLength(contentLength);
      }
      return ctx.res().getOutputStream();
    }
  }
}
