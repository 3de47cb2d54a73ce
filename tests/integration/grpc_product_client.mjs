// A product team's Node client of the auth API, made from proto/ at run time (@grpc/proto-loader, as
// grpc-js's own guide does), calling Authorize over mutual TLS with a product certificate.
// Usage: node grpc_product_client.mjs <authsvc target> <proto dir> <ca.pem> <cert.pem> <key.pem> <cases>
// where <cases> is a JSON list of AuthorizeRequest objects; prints the answers (or errors) and what
// CreateKey, which a product service may not call, answered.
import fs from "node:fs";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

const [target, protoDir, ca, cert, key, cases] = process.argv.slice(2);
const definition = protoLoader.loadSync("travel/auth/v1/auth.proto", {
  includeDirs: [protoDir],
  keepCase: true,
  enums: String,
  defaults: true,
});
const travel = grpc.loadPackageDefinition(definition).travel;
const credentials = grpc.credentials.createSsl(
  fs.readFileSync(ca),
  fs.readFileSync(key),
  fs.readFileSync(cert),
);
// The development CA names authsvc's certificate "authsvc" (and 127.0.0.1 besides).
const client = new travel.auth.v1.AuthService(target, credentials, {
  "grpc.ssl_target_name_override": "authsvc",
});

function authorize(request) {
  return new Promise((resolve) => {
    client.Authorize(request, { deadline: Date.now() + 10000 }, (error, answer) => {
      if (error) {
        resolve({ code: grpc.status[error.code], details: error.details });
      } else {
        resolve({
          decision: answer.decision,
          error_type: answer.error_type,
          account_id: answer.account ? answer.account.id : "",
        });
      }
    });
  });
}

// One call a product service may not make: creating a key administers the partner's account.
function createKey() {
  return new Promise((resolve) => {
    const request = { account_id: "acct_any", environment: "ENVIRONMENT_LIVE", scopes: ["hotels:read"] };
    client.CreateKey(request, { deadline: Date.now() + 10000 }, (error) => {
      resolve(error ? { code: grpc.status[error.code], details: error.details } : { code: "OK" });
    });
  });
}

const answers = [];
for (const request of JSON.parse(cases)) {
  answers.push(await authorize(request));
}
const refused = await createKey();
client.close();
process.stdout.write(JSON.stringify({ authorize: answers, create_key: refused }) + "\n");
