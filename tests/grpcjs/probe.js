// A proxyless gRPC client on grpc-js and grpc-js-xds, for the end-to-end tests: the same
// line protocol as tests/support/grpc_probe.py (grpcio), so one harness drives both.
//
// Reads one JSON request per line on standard input, {"target": "xds:///...", "service":
// "...", "timeout": seconds}, sends a grpc.health.v1 Health/Check through that target and
// answers with one JSON line: {"status": "SERVING"} or {"error": "NOT_FOUND: ..."}. The
// bootstrap is the file GRPC_XDS_BOOTSTRAP names. Exits at the end of its input, or after
// --lifetime seconds whatever happens.
//
// With --check-bootstrap it reads the bootstrap as grpc-js-xds does, answers one line,
// {"bootstrap": "valid"} or {"error": "why grpc-js-xds refuses it"}, and exits (a channel
// reports only a later, unrelated error for a refused bootstrap).
'use strict';

const path = require('path');
const readline = require('readline');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const grpcXds = require('@grpc/grpc-js-xds');

function lifetimeSeconds(argv) {
  const index = argv.indexOf('--lifetime');
  return index >= 0 ? Number(argv[index + 1]) : 120;
}

if (process.argv.includes('--check-bootstrap')) {
  const { loadBootstrapInfo } = require('@grpc/grpc-js-xds/build/src/xds-bootstrap');
  let answer = { bootstrap: 'valid' };
  try {
    loadBootstrapInfo();
  } catch (error) {
    answer = { error: error.message };
  }
  process.stdout.write(JSON.stringify(answer) + '\n');
  process.exit(0);
}

// A stuck test must never leave this process behind.
const watchdog = setTimeout(() => process.exit(3), lifetimeSeconds(process.argv) * 1000);

grpcXds.register();
const definition = protoLoader.loadSync(path.join(__dirname, 'health.proto'), {
  enums: String,
});
const Health = grpc.loadPackageDefinition(definition).grpc.health.v1.Health;
const codeNames = Object.fromEntries(Object.entries(grpc.status).map(([k, v]) => [v, k]));
const clients = new Map();

function check(request) {
  let client = clients.get(request.target);
  if (client === undefined) {
    client = new Health(request.target, grpc.credentials.createInsecure());
    clients.set(request.target, client);
  }
  const deadline = Date.now() + (request.timeout ?? 10) * 1000;
  return new Promise((resolve) => {
    client.Check({ service: request.service }, { deadline }, (error, response) => {
      if (error) {
        resolve({ error: `${codeNames[error.code] ?? error.code}: ${error.details}` });
      } else {
        resolve({ status: response.status });
      }
    });
  });
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin, terminal: false });
  for await (const line of lines) {
    if (!line.trim()) {
      continue;
    }
    const answer = await check(JSON.parse(line));
    process.stdout.write(JSON.stringify(answer) + '\n');
  }
  for (const client of clients.values()) {
    client.close();
  }
  clearTimeout(watchdog);
  process.exit(0);
}

main();
