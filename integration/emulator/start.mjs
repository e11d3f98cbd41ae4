// Launches the pinned fauxqs SQS emulator for the tempqueues tests.
//
// It listens on 127.0.0.1 only (the fauxqs CLI binds every interface), on
// $PORT or a free port, logs nothing per request, prints one line
// "READY http://127.0.0.1:<port>" once it accepts connections, and exits on
// SIGTERM/SIGINT or when its parent closes stdin, so a crashed test binary
// never leaves it running.
import { buildApp } from "fauxqs";

const app = buildApp({ logger: false });
await app.listen({ host: "127.0.0.1", port: Number(process.env.PORT ?? 0) });
process.stdout.write(`READY http://127.0.0.1:${app.server.address().port}\n`);

let stopping = false;
function stop() {
  if (stopping) return;
  stopping = true;
  app.close().finally(() => process.exit(0));
  setTimeout(() => process.exit(0), 2000).unref();
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
process.stdin.on("end", stop);
process.stdin.on("error", stop);
process.stdin.resume();
