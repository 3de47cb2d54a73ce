// The TypeScript client a partner generates: openapi-typescript's types, openapi-fetch's calls.
import createClient from "openapi-fetch";
import type { paths } from "./schema.js";

declare const process: { argv: string[] }; // node's, without @types/node

const [baseUrl, key] = process.argv.slice(2);
const svc = createClient<paths>({ baseUrl, headers: { Authorization: `Svc ${key}` } });

const endpoint = await svc.POST("/v1/webhooks/endpoints", {
  params: { header: { "Idempotency-Key": crypto.randomUUID() } },
  body: { url: "https://localhost:9/hook", events: ["booking.confirmed"] },
});
const booking = await svc.POST("/v1/hotels/bookings", {
  params: { header: { "Idempotency-Key": crypto.randomUUID(), "X-Partner-Customer-Ref": "cust-ts-1" } },
  body: { offer: "off_hotels_1" },
});
const refused = await svc.GET("/v1/hotels/bookings/{booking_id}", {
  params: { path: { booking_id: "bk_unknown" } },
});
console.log(
  JSON.stringify({
    endpoint: endpoint.data?.id,
    secret: endpoint.data?.secret?.startsWith("whsec_"),
    booking: booking.data?.id,
    state: booking.data?.state,
    status: refused.response.status,
    error: refused.error?.error.type,
    docUrl: refused.error?.error.docUrl,
  }),
);
