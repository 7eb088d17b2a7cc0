/**
 * A stand-in OpenTelemetry collector: reads whatever is POSTed (OTLP over HTTP, protobuf or JSON)
 * and answers 200 with an empty body, as a collector that accepts every span does. It keeps
 * nothing. GET /healthz: 200. Plain node:http, so that it costs as little as it can.
 * Run: PORT=4318 node --import tsx bench/servers/otlp-sink.ts
 */
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 4318);

const server = createServer((req, res) => {
  req.resume();
  req.once('end', () => {
    const type = req.headers['content-type'] === 'application/json' ? 'application/json' : 'application/x-protobuf';
    res.writeHead(200, { 'content-type': type, 'content-length': type === 'application/json' ? 2 : 0 }).end(type === 'application/json' ? '{}' : '');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, '127.0.0.1');
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeIdleConnections();
});
