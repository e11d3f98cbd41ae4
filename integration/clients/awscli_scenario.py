"""The client scenario of integration/clients/run.sh with an AWS CLI.

Usage: python3 awscli_scenario.py AWS ENDPOINT. Run with Debian's awscli
2.9, it speaks SQS's query protocol (form requests, XML answers). Each step
checks what the SQS API Reference documents; the first difference exits 1.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import time

aws, endpoint = sys.argv[1], sys.argv[2]
p = "cli-%d" % os.getpid()


def fail(what, got):
    print("awscli: %s: got %r" % (what, got), file=sys.stderr)
    sys.exit(1)


def check(ok, what, got):
    if not ok:
        fail(what, got)


def run(*args, want_error=False):
    cmd = [aws, "--endpoint-url", endpoint, "--region", "us-east-1", "--output", "json", "sqs", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if want_error:
        if r.returncode == 0:
            fail("%s should fail" % args[0], r.stdout)
        return r.stderr
    if r.returncode != 0:
        fail(" ".join(args[:1]), r.stderr)
    return json.loads(r.stdout) if r.stdout.strip() else {}


def md5(s):
    return hashlib.md5(s.encode("utf-8")).hexdigest()


def counts(url):
    a = run("get-queue-attributes", "--queue-url", url, "--attribute-names",
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")["Attributes"]
    return a["ApproximateNumberOfMessages"] + "/" + a["ApproximateNumberOfMessagesNotVisible"]


# Create with attributes and tags.
url = run("create-queue", "--queue-name", p + "-q", "--attributes", "VisibilityTimeout=30,MaximumMessageSize=2048",
          "--tags", "a=1")["QueueUrl"]
check(url.endswith("/000000000000/" + p + "-q"), "CreateQueue QueueUrl", url)

# An empty long poll waits.
t0 = time.time()
r = run("receive-message", "--queue-url", url, "--wait-time-seconds", "1")
check(not r.get("Messages") and time.time() - t0 >= 0.9, "empty long poll waits 1 s", time.time() - t0)

# Send with String, Number and Binary attributes and a unicode body.
body = "h\u00e9llo \u2713 \U0001F680 \r\n<&>"
binary = bytes([0, 1, 254, 255])
sent = run("send-message", "--queue-url", url, "--message-body", body, "--message-attributes", json.dumps({
    "s": {"DataType": "String", "StringValue": "\u00fc"},
    "n": {"DataType": "Number", "StringValue": "-1.5e3"},
    "b": {"DataType": "Binary", "BinaryValue": base64.b64encode(binary).decode()}}))
check(sent.get("MD5OfMessageBody") == md5(body) and sent.get("MessageId") and sent.get("MD5OfMessageAttributes"),
      "SendMessage answer", sent)

# Batch send.
batch = run("send-message-batch", "--queue-url", url, "--entries",
            json.dumps([{"Id": "e%d" % i, "MessageBody": "batch %d" % i} for i in (1, 2, 3)]))
check(len(batch.get("Successful", [])) == 3 and not batch.get("Failed"), "SendMessageBatch", batch)

# Long-poll receive of all four, attributes included.
got = {}
t0 = time.time()
while len(got) < 4 and time.time() - t0 < 10:
    r = run("receive-message", "--queue-url", url, "--max-number-of-messages", "10", "--wait-time-seconds", "2",
            "--message-attribute-names", "All", "--attribute-names", "All")
    for m in r.get("Messages", []):
        got[m["Body"]] = m
check(len(got) == 4, "received 4 messages", list(got))
m = got.get(body)
check(m is not None and m["MD5OfBody"] == md5(body), "unicode body round trip", m)
ma = m.get("MessageAttributes", {})
check(ma.get("s", {}).get("StringValue") == "\u00fc" and ma.get("n", {}).get("StringValue") == "-1.5e3"
      and base64.b64decode(ma.get("b", {}).get("BinaryValue", "")) == binary, "message attributes", ma)
check(m["Attributes"].get("ApproximateReceiveCount") == "1" and len(m["Attributes"].get("SentTimestamp", "")) == 13,
      "system attributes", m["Attributes"])
check(counts(url) == "0/4", "counts with 4 in flight", counts(url))

# Change visibility to 0: received again, count 2.
run("change-message-visibility", "--queue-url", url, "--receipt-handle", m["ReceiptHandle"], "--visibility-timeout", "0")
r = run("receive-message", "--queue-url", url, "--wait-time-seconds", "2", "--attribute-names", "ApproximateReceiveCount")
msgs = r.get("Messages", [])
check(len(msgs) == 1 and msgs[0]["Body"] == body and msgs[0]["Attributes"]["ApproximateReceiveCount"] == "2",
      "received again after visibility 0", msgs)

# Delete one, batch-delete the rest.
run("delete-message", "--queue-url", url, "--receipt-handle", msgs[0]["ReceiptHandle"])
rest = [x for b, x in got.items() if b != body]
d = run("delete-message-batch", "--queue-url", url, "--entries",
        json.dumps([{"Id": "d%d" % i, "ReceiptHandle": x["ReceiptHandle"]} for i, x in enumerate(rest)]))
check(len(d.get("Successful", [])) == 3 and not d.get("Failed"), "DeleteMessageBatch", d)
check(counts(url) == "0/0", "counts after deletes", counts(url))

# Attributes.
run("set-queue-attributes", "--queue-url", url, "--attributes", "VisibilityTimeout=60")
attrs = run("get-queue-attributes", "--queue-url", url, "--attribute-names", "All")["Attributes"]
check(attrs.get("VisibilityTimeout") == "60" and attrs.get("MaximumMessageSize") == "2048"
      and attrs.get("QueueArn") == "arn:aws:sqs:us-east-1:000000000000:" + p + "-q", "queue attributes", attrs)

# Tags.
run("tag-queue", "--queue-url", url, "--tags", "b=2")
run("untag-queue", "--queue-url", url, "--tag-keys", "a")
tags = run("list-queue-tags", "--queue-url", url).get("Tags")
check(tags == {"b": "2"}, "tags", tags)

# List with prefix.
other = run("create-queue", "--queue-name", p + "-other")["QueueUrl"]
lst = run("list-queues", "--queue-name-prefix", p + "-q").get("QueueUrls")
check(lst == [url], "ListQueues with prefix", lst)

# Purge.
run("send-message", "--queue-url", url, "--message-body", "to purge")
run("purge-queue", "--queue-url", url)
check(counts(url) == "0/0", "counts after purge", counts(url))

# Missing queue, delete queue.
err = run("get-queue-url", "--queue-name", p + "-nope", want_error=True)
check("AWS.SimpleQueueService.NonExistentQueue" in err, "missing queue error", err)
run("delete-queue", "--queue-url", url)
run("delete-queue", "--queue-url", other)
err = run("get-queue-url", "--queue-name", p + "-q", want_error=True)
check("AWS.SimpleQueueService.NonExistentQueue" in err, "deleted queue is gone", err)
print("awscli: ok")
