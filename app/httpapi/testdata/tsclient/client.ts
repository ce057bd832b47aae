// A client of delayq's API in TypeScript, typed by what openapi-typescript
// generates from openapi.json (schema.d.ts) and calling through
// openapi-fetch: it enqueues a job, reads it back, and prints both as JSON
// for the Go test (TestOpenAPIClientTypeScript) to check.
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Job = components["schemas"]["JobView"];

// Node's process, declared here rather than with @types/node: the client
// needs only its environment.
declare const process: { env: Record<string, string | undefined> };

function need(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set`);
  return v;
}

const client = createClient<paths>({
  baseUrl: need("DELAYQ_URL"),
  headers: { Authorization: `Bearer ${need("DELAYQ_TOKEN")}` },
});
const topic = need("DELAYQ_TOPIC");
const id = need("DELAYQ_JOB_ID");

const enq = await client.POST("/v1/topics/{topic}/jobs", {
  params: { path: { topic } },
  body: { id, payload: { hello: "typescript" }, delay_ms: 3_600_000, max_attempts: 3 },
});
if (enq.error || enq.response.status !== 202) {
  throw new Error(`enqueue: ${enq.response.status} ${JSON.stringify(enq.error)}`);
}

const got = await client.GET("/v1/topics/{topic}/jobs/{id}", { params: { path: { topic, id } } });
if (got.error) {
  throw new Error(`get: ${got.response.status} ${got.error.error.code}: ${got.error.error.message}`);
}
const job: Job = got.data;

// An error answer is typed too: its code is read without a cast.
const missing = await client.GET("/v1/topics/{topic}/jobs/{id}", { params: { path: { topic, id: `${id}-missing` } } });
const missingCode: string | undefined = missing.error?.error.code;

console.log(JSON.stringify({ enqueued: enq.data, job, missing: { status: missing.response.status, code: missingCode } }));
