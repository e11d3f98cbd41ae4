// The client scenario of integration/clients/run.sh with the AWS SDK for
// JavaScript v3 (SQS's JSON protocol). Usage: node scenario.mjs ENDPOINT.
// Each step checks what the SQS API Reference documents; the first
// difference exits 1.
import { createHash } from "node:crypto";
import {
  SQSClient, CreateQueueCommand, SendMessageCommand, SendMessageBatchCommand, ReceiveMessageCommand,
  ChangeMessageVisibilityCommand, DeleteMessageCommand, DeleteMessageBatchCommand, GetQueueAttributesCommand,
  SetQueueAttributesCommand, TagQueueCommand, UntagQueueCommand, ListQueueTagsCommand, ListQueuesCommand,
  PurgeQueueCommand, GetQueueUrlCommand, DeleteQueueCommand, QueueDoesNotExist,
} from "@aws-sdk/client-sqs";

const endpoint = process.argv[2];
const sqs = new SQSClient({ endpoint, region: "us-east-1", credentials: { accessKeyId: "x", secretAccessKey: "x" } });
const p = "js-" + process.pid;

function check(ok, what, got) {
  if (!ok) {
    console.error(`js: ${what}: got ${JSON.stringify(got)}`);
    process.exit(1);
  }
}
const md5 = (s) => createHash("md5").update(s, "utf8").digest("hex");
const counts = async (url) => {
  const a = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url,
    AttributeNames: ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"] }))).Attributes;
  return a.ApproximateNumberOfMessages + "/" + a.ApproximateNumberOfMessagesNotVisible;
};

// Create with attributes and tags.
const { QueueUrl: url } = await sqs.send(new CreateQueueCommand({ QueueName: p + "-q",
  Attributes: { VisibilityTimeout: "30", MaximumMessageSize: "2048" }, tags: { a: "1" } }));
check(url.endsWith("/000000000000/" + p + "-q"), "CreateQueue QueueUrl", url);

// An empty long poll waits.
let t0 = Date.now();
let r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1 }));
check((r.Messages ?? []).length === 0 && Date.now() - t0 >= 900, "empty long poll waits 1 s", Date.now() - t0);

// Send with String, Number and Binary attributes and a unicode body.
const body = "héllo ✓ 🚀 \r\n<&>";
const sent = await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body, MessageAttributes: {
  s: { DataType: "String", StringValue: "ü" }, n: { DataType: "Number", StringValue: "-1.5e3" },
  b: { DataType: "Binary", BinaryValue: new Uint8Array([0, 1, 254, 255]) } } }));
check(sent.MD5OfMessageBody === md5(body) && sent.MessageId && sent.MD5OfMessageAttributes, "SendMessage answer", sent);

// Batch send.
const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url,
  Entries: ["1", "2", "3"].map((i) => ({ Id: "e" + i, MessageBody: "batch " + i })) }));
check(batch.Successful?.length === 3 && !(batch.Failed?.length), "SendMessageBatch", batch);

// Long-poll receive of all four, attributes included.
const got = new Map();
t0 = Date.now();
while (got.size < 4 && Date.now() - t0 < 10000) {
  r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 2,
    MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"] }));
  for (const m of r.Messages ?? []) got.set(m.Body, m);
}
check(got.size === 4, "received 4 messages", [...got.keys()]);
const m = got.get(body);
check(m && m.MD5OfBody === md5(body), "unicode body round trip", m?.Body);
check(m.MessageAttributes.s.StringValue === "ü" && m.MessageAttributes.n.StringValue === "-1.5e3" &&
  Buffer.from(m.MessageAttributes.b.BinaryValue).equals(Buffer.from([0, 1, 254, 255])), "message attributes", m.MessageAttributes);
check(m.Attributes.ApproximateReceiveCount === "1" && /^\d{13}$/.test(m.Attributes.SentTimestamp), "system attributes", m.Attributes);
check(await counts(url) === "0/4", "counts with 4 in flight", await counts(url));

// Change visibility to 0: received again, count 2.
await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0 }));
r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 2, MessageSystemAttributeNames: ["ApproximateReceiveCount"] }));
check(r.Messages?.[0]?.Body === body && r.Messages[0].Attributes.ApproximateReceiveCount === "2", "received again after visibility 0", r.Messages);

// Delete one, batch-delete the rest.
await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: r.Messages[0].ReceiptHandle }));
const rest = [...got.values()].filter((x) => x.Body !== body);
const del = await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url,
  Entries: rest.map((x, i) => ({ Id: "d" + i, ReceiptHandle: x.ReceiptHandle })) }));
check(del.Successful?.length === 3 && !(del.Failed?.length), "DeleteMessageBatch", del);
check(await counts(url) === "0/0", "counts after deletes", await counts(url));

// Attributes.
await sqs.send(new SetQueueAttributesCommand({ QueueUrl: url, Attributes: { VisibilityTimeout: "60" } }));
const attrs = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ["All"] }))).Attributes;
check(attrs.VisibilityTimeout === "60" && attrs.MaximumMessageSize === "2048" &&
  attrs.QueueArn === "arn:aws:sqs:us-east-1:000000000000:" + p + "-q", "queue attributes", attrs);

// Tags.
await sqs.send(new TagQueueCommand({ QueueUrl: url, Tags: { b: "2" } }));
await sqs.send(new UntagQueueCommand({ QueueUrl: url, TagKeys: ["a"] }));
const tags = (await sqs.send(new ListQueueTagsCommand({ QueueUrl: url }))).Tags;
check(JSON.stringify(tags) === '{"b":"2"}', "tags", tags);

// List with prefix.
const { QueueUrl: other } = await sqs.send(new CreateQueueCommand({ QueueName: p + "-other" }));
const list = (await sqs.send(new ListQueuesCommand({ QueueNamePrefix: p + "-q" }))).QueueUrls;
check(list?.length === 1 && list[0] === url, "ListQueues with prefix", list);

// Purge.
await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "to purge" }));
await sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
check(await counts(url) === "0/0", "counts after purge", await counts(url));

// Missing queue, delete queue.
const missing = async (what) => {
  try {
    await sqs.send(new GetQueueUrlCommand({ QueueName: what }));
  } catch (e) {
    return e;
  }
  return null;
};
let e = await missing(p + "-nope");
check(e instanceof QueueDoesNotExist && e.$metadata.httpStatusCode === 400, "missing queue error", e?.name);
await sqs.send(new DeleteQueueCommand({ QueueUrl: url }));
await sqs.send(new DeleteQueueCommand({ QueueUrl: other }));
e = await missing(p + "-q");
check(e instanceof QueueDoesNotExist, "deleted queue is gone", e?.name);
console.log("js: ok");
